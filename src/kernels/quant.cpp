// quant.hpp: the F16 conversion at load, the portable dequantizer, the dispatch of
// linear_matrix (int8 goes to int8.hpp) and the reference. F16 bits are core's conversions.
#include "kernels/quant.hpp"

#include <algorithm>
#include <vector>

#include "kernels/amx.hpp"
#include "kernels/dispatch/kernel_table.hpp"
#include "kernels/targets/portable/kernels.hpp"
#include "kernels/family/scalar_math.hpp"
#include "kernels/infra/thread_pool.hpp"

namespace kael::kernels {
namespace {

float element(const float* src, std::int64_t K, std::int64_t N, std::int64_t k, std::int64_t n, bool transposed) {
  return transposed ? src[n * K + k] : src[k * N + n];
}

// Panels dequantized per pass: 4 lets the M = 1 GEMV run 4 panel streams (8 FMA chains, as
// linear_packed does); fewer when K is long, so the scratch block (<= 512 KiB) stays in L2.
std::int64_t panels_per_pass(std::int64_t K) {
  return std::clamp<std::int64_t>((std::int64_t{1} << 19) / (kPanel * K * std::int64_t{sizeof(float)}), 1, 4);
}

}  // namespace

void convert_f16_panels(std::uint16_t* dst, const float* src, std::int64_t K, std::int64_t N, bool transposed) {
  for (std::int64_t col = 0; col < N; col += kPanel) {
    const std::int64_t w = std::min(kPanel, N - col);
    std::uint16_t* panel = dst + col * K;
    for (std::int64_t k = 0; k < K; ++k)
      for (std::int64_t j = 0; j < w; ++j) panel[k * w + j] = f32_to_f16(element(src, K, N, k, col + j, transposed));
  }
}

namespace portable {
void dequantize_f16_panel(float* dst, const std::uint16_t* panel, std::int64_t K, std::int64_t w) {
  for (std::int64_t i = 0; i < K * w; ++i) dst[i] = f16_to_f32(panel[i]);
}
}  // namespace portable

void linear_matrix(float* out, const float* inp, const PackedMatrix& w, const float* bias, std::int64_t T,
                   std::int64_t K, std::int64_t N, Epilogue epilogue) {
  if (w.type == WeightDType::f32) {
    linear_packed(out, inp, static_cast<const float*>(w.data), bias, T, K, N, epilogue);
    return;
  }
  if (w.tiles) {  // amx.hpp's formats
    if (w.type == WeightDType::bf16)
      bf16_linear(out, inp, static_cast<const std::uint16_t*>(w.data), bias, T, K, N, epilogue);
    else
      int8c_linear(out, inp, static_cast<const std::uint8_t*>(w.data), bias, T, K, N, epilogue);
    return;
  }
  if (w.type == WeightDType::int8) {
    int8_linear(out, inp, static_cast<const std::int8_t*>(w.data), w.scales, bias, T, K, N, epilogue);
    return;
  }
  const KernelTable& kt = active_kernels();
  const auto* h = static_cast<const std::uint16_t*>(w.data);
  const std::int64_t panels = (N + kPanel - 1) / kPanel, group = panels_per_pass(K);
  const std::int64_t min_panels = min_product_items_per_thread(T * K * kPanel, K * kPanel * 2);
  parallel_for(panels, min_panels, [&](std::int64_t first, std::int64_t last) {
    thread_local std::vector<float> scratch;
    scratch.resize(static_cast<std::size_t>(group * kPanel * K));
    std::int64_t p = first;
    if (kt.f16_gemm != nullptr && T <= kt.f16_gemm_rows) {  // full panels straight from the F16 weights
      const std::int64_t full = std::min(last, N / kPanel) - first;
      if (full > 0) {
        const std::int64_t col = first * kPanel;
        kt.f16_gemm(out + col, N, inp, K, h + col * K, T, full, K, bias ? bias + col : nullptr, epilogue);
        p += full;
      }
    }
    for (; p < last; p += group) {
      const std::int64_t col = p * kPanel;
      const std::int64_t cols = std::min(N, std::min(last, p + group) * kPanel) - col;
      // Panels p.. are contiguous in both the source and (with the same layout) the scratch.
      for (std::int64_t c = 0; c < cols; c += kPanel)
        kt.dequantize_f16_panel(scratch.data() + c * K, h + (col + c) * K, K, std::min(kPanel, cols - c));
      kt.gemm_panels(out + col, N, inp, K, scratch.data(), kPanel, kPanel * K, true, T, cols, K,
                     bias ? bias + col : nullptr, epilogue);
    }
  });
}

void unpack_matrix_column(float* out, const PackedMatrix& w, std::int64_t K, std::int64_t N, std::int64_t n) {
  if (w.tiles) {  // amx.hpp's formats
    for (std::int64_t k = 0; k < K; ++k)
      out[k] = w.type == WeightDType::bf16 ? bf16_tile_weight(static_cast<const std::uint16_t*>(w.data), K, k, n)
                                          : int8c_weight(static_cast<const std::uint8_t*>(w.data), K, N, k, n);
    return;
  }
  if (w.type == WeightDType::int8) {
    for (std::int64_t k = 0; k < K; ++k)
      out[k] = int8_weight(static_cast<const std::int8_t*>(w.data), w.scales, K, k, n);
    return;
  }
  const std::int64_t col = n / kPanel * kPanel, width = std::min(kPanel, N - col), j = n - col;
  for (std::int64_t k = 0; k < K; ++k) {
    const std::int64_t i = col * K + k * width + j;
    if (w.type == WeightDType::f32)
      out[k] = static_cast<const float*>(w.data)[i];
    else
      out[k] = f16_to_f32(static_cast<const std::uint16_t*>(w.data)[i]);
  }
}

namespace ref {
void linear_matrix(float* out, const float* inp, const PackedMatrix& w, const float* bias, std::int64_t T,
                   std::int64_t K, std::int64_t N, Epilogue epilogue) {
  if (w.tiles && w.type == WeightDType::int8) {
    ref::int8c_linear(out, inp, static_cast<const std::uint8_t*>(w.data), bias, T, K, N, epilogue);
    return;
  }
  if (w.tiles) {
    ref::bf16_linear(out, inp, static_cast<const std::uint16_t*>(w.data), bias, T, K, N, epilogue);
    return;
  }
  std::vector<float> column(static_cast<std::size_t>(K));
  // int8 multiplies the activations as quantize_rows rounds them (its scalar form).
  std::vector<double> x(inp, inp + T * K);
  if (w.type == WeightDType::int8) {
    const std::int64_t Kp = int8_padded_k(K), groups = Kp / kInt8Group;
    std::vector<std::int8_t> xq(static_cast<std::size_t>(T * Kp));
    std::vector<float> xs(static_cast<std::size_t>(T * groups));
    portable::quantize_rows(xq.data(), xs.data(), inp, T, K);
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t k = 0; k < K; ++k)
        x[static_cast<std::size_t>(t * K + k)] = static_cast<double>(xq[static_cast<std::size_t>(t * Kp + k)]) *
            xs[static_cast<std::size_t>(t * groups + k / kInt8Group)];
  }
  for (std::int64_t n = 0; n < N; ++n) {
    unpack_matrix_column(column.data(), w, K, N, n);
    for (std::int64_t t = 0; t < T; ++t) {
      double y = bias ? bias[n] : 0.0;
      for (std::int64_t k = 0; k < K; ++k) y += x[static_cast<std::size_t>(t * K + k)] * column[static_cast<std::size_t>(k)];
      store_epilogue(out[t * N + n], y, epilogue);
    }
  }
}
}  // namespace ref

}  // namespace kael::kernels
