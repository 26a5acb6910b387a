// amx.hpp: when its formats can run, the weight conversions at load, the threaded driver of
// the per-column int8 product (bf16_linear shares gemm_bf16.cpp's) and the plain references,
// and the kernel table's AMX hook (the tile permission). Built for the baseline target, since
// load and the checks run on any CPU: the AMX and AVX-512 instructions are kernel table
// entries (kernels/targets/amx/, kernels/targets/avx512/), which exist only in an x86 build.
#include "kernels/amx.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#if KAEL_AMX_KERNELS
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "kael/core/dtype.hpp"
#include "kael/core/error.hpp"
#include "kernels/infra/aligned_vector.hpp"
#include "kernels/amx_output.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/dispatch/kernel_table.hpp"
#include "kernels/infra/thread_pool.hpp"

namespace kael::kernels {
namespace {

float element(const float* src, std::int64_t K, std::int64_t N, std::int64_t k, std::int64_t n, bool transposed) {
  return transposed ? src[n * K + k] : src[k * N + n];
}

std::int64_t bf16_offset(std::int64_t Kp, std::int64_t k, std::int64_t n) {
  return n / kPanel * kPanel * Kp + k / 2 * 32 + n % kPanel * 2 + k % 2;
}

std::int64_t int8c_offset(std::int64_t Kp, std::int64_t k, std::int64_t n) {
  return n / kPanel * kPanel * Kp + k / 4 * 64 + n % kPanel * 4 + k % 4;
}

const float* int8c_scales(const std::uint8_t* w, std::int64_t K, std::int64_t N) {
  return reinterpret_cast<const float*>(w + int8c_padded_k(K) * int8c_padded_n(N));
}

const std::int32_t* int8c_sums(const std::uint8_t* w, std::int64_t K, std::int64_t N) {
  return reinterpret_cast<const std::int32_t*>(int8c_scales(w, K, N) + int8c_padded_n(N));
}


// The calling thread's scratch for converted activations: (rows, width), padded to whole
// tiles of rows; the rows past `used` are zero (the converters write the others).
template <class T>
T* scratch(AlignedVector<T>& buffer, std::int64_t used, std::int64_t width) {
  const std::int64_t rows = round_up(used, 32);
  buffer.resize(static_cast<std::size_t>(rows * width));
  std::fill(buffer.begin() + used * width, buffer.end(), T{});
  return buffer.data();
}

// Runs convert(first, last) over the rows [0, T) split among the threads at multiples of 16
// (a tile of rows, so each range starts where the tiled layout starts a row group). The
// converters read each element about four times (magnitude, finiteness, scale, narrow).
template <class Convert>
void convert_rows_parallel(std::int64_t T, std::int64_t K, Convert convert) {
  parallel_for(round_up(T, 16) / 16, min_items_per_thread(16 * K * 4), [&](std::int64_t first, std::int64_t last) {
    convert(first * 16, std::min(T, last * 16));
  });
}

// The references' epilogue on one output, y already including the bias.
float finish_ref(float y, float old, Epilogue epilogue) {
  if (epilogue == Epilogue::gelu) ref::gelu_new(&y, &y, 1);
  return epilogue == Epilogue::residual ? old + y : y;
}

}  // namespace

void require_bf16() {
#if KAEL_AMX_KERNELS
  if (!cpu_features().avx512_bf16)
    throw ValueError("dtype bf16 needs a CPU with AVX512-BF16 (the BF16 dot product); this one lacks it: "
                     "use f32, f16 or int8");
  if (active_isa() < Isa::avx512)
    throw ValueError(str("dtype bf16 needs the avx512 or amx kernels, but the ", isa_name(active_isa()),
                         " set is in use (KAEL_ISA)"));
#else
  throw ValueError("dtype bf16 needs AVX512-BF16 kernels, which this build (not for x86) lacks");
#endif
}

bool int8_per_column() {
  const KernelTable& kt = active_kernels();
  return kt.int8c_tile_gemm != nullptr && kt.int8c_gemv != nullptr;
}

#if KAEL_AMX_KERNELS
namespace amx {

bool available(const CpuFeatures& cpu, std::string* why) {
  (void)cpu;  // the CPUID and XCR0 bits were checked by the caller
  constexpr int kArchReqXcompPerm = 0x1023;  // arch_prctl code (asm/prctl.h)
  constexpr int kXfeatureXtiledata = 18;     // the tile data state component
  static const bool granted = syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  if (!granted && why != nullptr) *why = "arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) failed (a VM or an old kernel)";
  return granted;
}

}  // namespace amx
#endif

void convert_bf16_tiles(std::uint16_t* dst, const float* src, std::int64_t K, std::int64_t N, bool transposed) {
  const KernelTable& kt = active_kernels();
  if (kt.bf16_pack_panels == nullptr) {
    ref::convert_bf16_tiles(dst, src, K, N, transposed);
    return;
  }
  // gemm_bf16's AVX-512 packer writes this layout (padding included) with the same rounding.
  const std::int64_t Kp = bf16_padded_k(K), panels = bf16_padded_n(N) / kPanel;
  parallel_for(panels, min_items_per_thread(kPanel * Kp), [&](std::int64_t p0, std::int64_t p1) {
    kt.bf16_pack_panels(dst, src, transposed ? K : N, transposed, N, K, p0, p1);
  });
}

float bf16_tile_weight(const std::uint16_t* w, std::int64_t K, std::int64_t k, std::int64_t n) {
  return bf16_to_f32(w[bf16_offset(bf16_padded_k(K), k, n)]);
}

void quantize_int8c(std::uint8_t* dst, const float* src, std::int64_t K, std::int64_t N, bool transposed) {
  const std::int64_t Kp = int8c_padded_k(K), Np = int8c_padded_n(N);
  std::memset(dst, 0, static_cast<std::size_t>(int8c_matrix_bytes(K, N)));
  auto* q = reinterpret_cast<std::int8_t*>(dst);
  auto* scales = reinterpret_cast<float*>(dst + Kp * Np);
  auto* sums = reinterpret_cast<std::int32_t*>(scales + Np);
  for (std::int64_t n = 0; n < N; ++n) {
    float amax = 0.0f;
    for (std::int64_t k = 0; k < K; ++k) {
      const float w = element(src, K, N, k, n, transposed);
      if (!std::isfinite(w)) throw ValueError(str("weight (", k, ", ", n, ") is ", w, ", which int8 cannot hold"));
      amax = std::max(amax, std::fabs(w));
    }
    scales[n] = amax / 127.0f;
    if (amax == 0.0f) continue;
    std::int32_t sum = 0;
    for (std::int64_t k = 0; k < K; ++k) {
      const float v = std::clamp(std::nearbyint(element(src, K, N, k, n, transposed) / scales[n]), -127.0f, 127.0f);
      q[int8c_offset(Kp, k, n)] = static_cast<std::int8_t>(v);
      sum += static_cast<std::int32_t>(v);
    }
    sums[n] = sum;
  }
}

float int8c_weight(const std::uint8_t* w, std::int64_t K, std::int64_t N, std::int64_t k, std::int64_t n) {
  const auto q = static_cast<std::int8_t>(w[int8c_offset(int8c_padded_k(K), k, n)]);
  return static_cast<float>(q) * int8c_scales(w, K, N)[n];
}

void quantize_rows_int8c(std::int8_t* xq, float* xs, const float* x, std::int64_t T, std::int64_t K) {
  const std::int64_t Kp = int8c_padded_k(K);
  for (std::int64_t t = 0; t < T; ++t) {
    const float* row = x + t * K;
    std::int8_t* q = xq + t * Kp;
    std::memset(q, 0, static_cast<std::size_t>(Kp));
    float amax = 0.0f, probe = 0.0f;  // probe: NaN when the row holds an infinity or NaN
    for (std::int64_t k = 0; k < K; ++k) {
      amax = std::max(amax, std::fabs(row[k]));
      probe += row[k] * 0.0f;
    }
    if (probe != 0.0f) {
      xs[t] = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    xs[t] = amax / 127.0f;
    if (amax == 0.0f) continue;
    const float inv = 127.0f / amax;
    for (std::int64_t k = 0; k < K; ++k) q[k] = static_cast<std::int8_t>(std::nearbyint(row[k] * inv));
  }
}

void int8c_linear(float* out, const float* x, const std::uint8_t* w, const float* bias, std::int64_t T,
                  std::int64_t K, std::int64_t N, Epilogue epilogue) {
  if (!int8_per_column()) throw ValueError("per-column int8 weights need the amx kernels with AVX512-VNNI");
  const KernelTable& kt = active_kernels();
  const std::int64_t Kp = int8c_padded_k(K), blocks = int8c_padded_n(N) / 32;
  thread_local AlignedVector<std::int8_t> xq_buffer;  // the workers reach them through these pointers
  thread_local AlignedVector<float> xs_buffer;       // (theirs are others)
  std::int8_t* xq = scratch(xq_buffer, T, Kp);
  float* xs = scratch(xs_buffer, T, 1);
  const bool tiles = T >= kAmxMinRows;
  Int8cGemmFn* const product = tiles ? kt.int8c_tile_gemm : kt.int8c_gemv;
  convert_rows_parallel(T, K, [&](std::int64_t t0, std::int64_t t1) {
    kt.int8c_quantize_rows(xq + t0 * Kp, xs + t0, x + t0 * K, t1 - t0, K, Kp, tiles);
  });
  const auto* q = reinterpret_cast<const std::int8_t*>(w);
  const float* scales = int8c_scales(w, K, N);
  const std::int32_t* sums = int8c_sums(w, K, N);
  const std::int64_t min_blocks = min_product_items_per_thread(T * Kp * 32, Kp * 32);
  parallel_for(blocks, min_blocks, [&](std::int64_t first, std::int64_t last) {
    const std::int64_t col = first * 32;
    product(out + col, N, xq, xs, T, Kp, q + col * Kp, scales + col, sums + col, last - first, N - col,
            bias ? bias + col : nullptr, epilogue);
  });
}

namespace ref {

void convert_bf16_tiles(std::uint16_t* dst, const float* src, std::int64_t K, std::int64_t N, bool transposed) {
  const std::int64_t Kp = bf16_padded_k(K);
  std::memset(dst, 0, static_cast<std::size_t>(bf16_matrix_elements(K, N)) * sizeof(std::uint16_t));
  // In the source's order, so src is read line after line.
  if (transposed) {
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t k = 0; k < K; ++k) dst[bf16_offset(Kp, k, n)] = f32_to_bf16(src[n * K + k]);
  } else {
    for (std::int64_t k = 0; k < K; ++k)
      for (std::int64_t n = 0; n < N; ++n) dst[bf16_offset(Kp, k, n)] = f32_to_bf16(src[k * N + n]);
  }
}

void bf16_linear(float* out, const float* x, const std::uint16_t* w, const float* bias, std::int64_t T,
                 std::int64_t K, std::int64_t N, Epilogue epilogue) {
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t n = 0; n < N; ++n) {
      double y = 0.0;
      for (std::int64_t k = 0; k < K; ++k)
        y += static_cast<double>(bf16_to_f32(f32_to_bf16(x[t * K + k]))) * bf16_tile_weight(w, K, k, n);
      float& o = out[t * N + n];
      o = finish_ref(static_cast<float>(y) + (bias ? bias[n] : 0.0f), o, epilogue);
    }
}

void int8c_linear(float* out, const float* x, const std::uint8_t* w, const float* bias, std::int64_t T,
                  std::int64_t K, std::int64_t N, Epilogue epilogue) {
  const std::int64_t Kp = int8c_padded_k(K);
  std::vector<std::int8_t> xq(static_cast<std::size_t>(T * Kp));
  std::vector<float> xs(static_cast<std::size_t>(T));
  quantize_rows_int8c(xq.data(), xs.data(), x, T, K);
  const auto* q = reinterpret_cast<const std::int8_t*>(w);
  const float* scales = int8c_scales(w, K, N);
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t n = 0; n < N; ++n) {
      std::int32_t dot = 0;
      for (std::int64_t k = 0; k < K; ++k) dot += std::int32_t{xq[t * Kp + k]} * q[int8c_offset(Kp, k, n)];
      const float y = int8c_output(dot, xs[t], scales[n], bias ? bias[n] : 0.0f);
      float& o = out[t * N + n];
      o = finish_ref(y, o, epilogue);
    }
}

}  // namespace ref

}  // namespace kael::kernels
