// int8.hpp: the weight quantizer (at load), the portable activation quantizer and GEMM, and
// the threaded dispatch of int8_linear.
#include "kernels/int8.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kael/core/dtype.hpp"
#include "kael/core/error.hpp"
#include "kernels/dispatch/kernel_table.hpp"
#include "kernels/targets/portable/kernels.hpp"
#include "kernels/family/scalar_math.hpp"
#include "kernels/infra/thread_pool.hpp"

namespace kael::kernels {
namespace {

constexpr std::int64_t kBlocksPerGroup = kInt8Group / 4;  // k4 blocks of 64 bytes per group and panel

// The smallest BF16 >= s (s finite and >= 0), so that max |w| / scale <= 127.
std::uint16_t bf16_round_up(float s) {
  std::uint32_t bits = std::bit_cast<std::uint32_t>(s);
  if ((bits & 0xffffu) != 0) bits += 0x10000u;
  return static_cast<std::uint16_t>(bits >> 16);
}

// Byte offset of weight (k, n) in the layout of int8.hpp.
std::int64_t weight_offset(std::int64_t Kp, std::int64_t k, std::int64_t n) {
  return n / kPanel * kPanel * Kp + k / 4 * 64 + n % kPanel * 4 + k % 4;
}

std::int64_t scale_offset(std::int64_t Kp, std::int64_t k, std::int64_t n) {
  return (n / kPanel * (Kp / kInt8Group) + k / kInt8Group) * kPanel + n % kPanel;
}

}  // namespace

void quantize_int8_panels(std::int8_t* q, std::uint16_t* scales, const float* src, std::int64_t K, std::int64_t N,
                          bool transposed) {
  const std::int64_t Kp = int8_padded_k(K);
  std::memset(q, 0, static_cast<std::size_t>(int8_weight_bytes(K, N)));
  std::memset(scales, 0, static_cast<std::size_t>(int8_scale_count(K, N)) * sizeof(std::uint16_t));
  const auto element = [&](std::int64_t k, std::int64_t n) { return transposed ? src[n * K + k] : src[k * N + n]; };
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t k0 = 0; k0 < K; k0 += kInt8Group) {
      const std::int64_t k1 = std::min(K, k0 + kInt8Group);
      float amax = 0.0f;
      for (std::int64_t k = k0; k < k1; ++k) {
        const float w = element(k, n);
        if (!std::isfinite(w)) throw ValueError(str("weight (", k, ", ", n, ") is ", w, ", which int8 cannot hold"));
        amax = std::max(amax, std::fabs(w));
      }
      const std::uint16_t scale = bf16_round_up(amax / 127.0f);
      scales[scale_offset(Kp, k0, n)] = scale;
      const float s = bf16_to_f32(scale);
      if (s == 0.0f) continue;
      for (std::int64_t k = k0; k < k1; ++k)
        q[weight_offset(Kp, k, n)] = static_cast<std::int8_t>(std::clamp(std::nearbyint(element(k, n) / s), -127.0f, 127.0f));
    }
}

float int8_weight(const std::int8_t* q, const std::uint16_t* scales, std::int64_t K, std::int64_t k, std::int64_t n) {
  const std::int64_t Kp = int8_padded_k(K);
  return static_cast<float>(q[weight_offset(Kp, k, n)]) * bf16_to_f32(scales[scale_offset(Kp, k, n)]);
}

const char* int8_dot_name() { return active_kernels().int8_dot; }

void quantize_rows(std::int8_t* xq, float* xs, const float* x, std::int64_t T, std::int64_t K) {
  active_kernels().quantize_rows(xq, xs, x, T, K);
}

namespace portable {

void quantize_rows(std::int8_t* xq, float* xs, const float* x, std::int64_t T, std::int64_t K) {
  const std::int64_t Kp = int8_padded_k(K), groups = Kp / kInt8Group;
  for (std::int64_t t = 0; t < T; ++t) {
    const float* row = x + t * K;
    std::int8_t* q = xq + t * Kp;
    for (std::int64_t g = 0; g < groups; ++g) {
      const std::int64_t k0 = g * kInt8Group, k1 = std::min(K, k0 + kInt8Group);
      float amax = 0.0f, probe = 0.0f;  // probe: NaN when the group holds an infinity or NaN
      for (std::int64_t k = k0; k < k1; ++k) {
        amax = std::max(amax, std::fabs(row[k]));
        probe += row[k] * 0.0f;
      }
      std::memset(q + k0, 0, kInt8Group);
      if (probe != 0.0f) {  // NaN compares unequal
        xs[t * groups + g] = std::numeric_limits<float>::quiet_NaN();
        continue;
      }
      xs[t * groups + g] = amax / 127.0f;
      if (amax == 0.0f) continue;
      const float inv = 127.0f / amax;
      for (std::int64_t k = k0; k < k1; ++k) q[k] = static_cast<std::int8_t>(std::nearbyint(row[k] * inv));
    }
  }
}

void int8_gemm(float* c, std::int64_t ldc, const std::int8_t* xq, const float* xs, std::int64_t M, std::int64_t Kp,
               const std::int8_t* w, const std::uint16_t* scales, std::int64_t panels, std::int64_t n_valid,
               const float* bias, Epilogue epilogue) {
  const std::int64_t groups = Kp / kInt8Group;
  for (std::int64_t p = 0; p < panels; ++p) {
    const std::int8_t* panel = w + p * kPanel * Kp;
    const std::uint16_t* panel_scales = scales + p * groups * kPanel;
    const std::int64_t width = std::min(kPanel, n_valid - p * kPanel);
    for (std::int64_t r = 0; r < M; ++r) {
      float acc[kPanel] = {};
      for (std::int64_t g = 0; g < groups; ++g) {
        std::int32_t dot[kPanel] = {};
        const std::int8_t* x = xq + r * Kp + g * kInt8Group;
        const std::int8_t* wg = panel + g * kBlocksPerGroup * 64;
        for (std::int64_t b = 0; b < kBlocksPerGroup; ++b)
          for (std::int64_t j = 0; j < kPanel; ++j)
            for (std::int64_t i = 0; i < 4; ++i) dot[j] += std::int32_t{x[b * 4 + i]} * wg[b * 64 + j * 4 + i];
        const float xscale = xs[r * groups + g];
        for (std::int64_t j = 0; j < kPanel; ++j)
          acc[j] += static_cast<float>(dot[j]) * (xscale * bf16_to_f32(panel_scales[g * kPanel + j]));
      }
      float* out = c + r * ldc + p * kPanel;
      for (std::int64_t j = 0; j < width; ++j)
        store_epilogue(out[j], acc[j] + (bias ? bias[p * kPanel + j] : 0.0f), epilogue);
    }
  }
}

}  // namespace portable

namespace {

// Activations quantized for int8_linear: T rows of Kp values, and a scale per group of each.
struct QuantizedRows {
  std::vector<std::int8_t> values;
  std::vector<float> scales;
};

// This thread's buffers, sized for T rows. Each thread reaches its own through this function,
// never by naming a block-scope thread_local from a lambda: a thread that has not passed the
// declaration would use an instance whose destructor was never registered (leaked at exit).
QuantizedRows& thread_quantized_rows(std::int64_t T, std::int64_t Kp, std::int64_t groups) {
  thread_local QuantizedRows rows;
  rows.values.resize(static_cast<std::size_t>(T * Kp));
  rows.scales.resize(static_cast<std::size_t>(T * groups));
  return rows;
}

}  // namespace

void int8_linear(float* out, const float* x, const std::int8_t* q, const std::uint16_t* scales, const float* bias,
                 std::int64_t T, std::int64_t K, std::int64_t N, Epilogue epilogue) {
  const std::int64_t Kp = int8_padded_k(K), groups = Kp / kInt8Group, panels = int8_padded_n(N) / kPanel;
  // The calling thread's buffers, read by the workers while it waits in parallel_for (through
  // these pointers).
  QuantizedRows& rows = thread_quantized_rows(T, Kp, groups);
  std::int8_t* const xq = rows.values.data();
  float* const xs = rows.scales.data();
  const KernelTable& kt = active_kernels();
  // Each row is quantized on its own, so a prefill's rows split over the threads like any
  // conversion of K floats a row. Rows too few to split (a decode step's) are quantized by
  // every thread that takes panels, into its own buffers, at the start of its range: the same
  // bits, and no serial call for the other threads to wait beside.
  const std::int64_t min_rows = min_items_per_thread(K * 4);
  const bool each_thread_quantizes = T < 2 * min_rows;
  if (!each_thread_quantizes)
    parallel_for(T, min_rows, [&](std::int64_t t0, std::int64_t t1) {
      kt.quantize_rows(xq + t0 * Kp, xs + t0 * groups, x + t0 * K, t1 - t0, K);
    });
  const std::int64_t min_panels = min_product_items_per_thread(T * Kp * kPanel, Kp * kPanel);
  parallel_for(panels, min_panels, [&](std::int64_t first, std::int64_t last) {
    const std::int8_t* row_q = xq;
    const float* row_s = xs;
    if (each_thread_quantizes) {  // this thread's own buffers (the caller's, when it is the caller)
      QuantizedRows& own = thread_quantized_rows(T, Kp, groups);
      kt.quantize_rows(own.values.data(), own.scales.data(), x, T, K);
      row_q = own.values.data();
      row_s = own.scales.data();
    }
    const std::int64_t col = first * kPanel;
    const std::int8_t* w = q + col * Kp;
    const std::uint16_t* s = scales + first * groups * kPanel;
    const float* b = bias ? bias + col : nullptr;
    kt.int8_gemm(out + col, N, row_q, row_s, T, Kp, w, s, last - first, N - col, b, epilogue);
  });
}

}  // namespace kael::kernels
