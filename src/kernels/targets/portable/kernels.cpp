// The portable F32 kernels and the portable table. Loops are written with independent lanes
// so that g++ vectorizes them without reordering any sum (no -ffast-math).
#include "kernels/targets/portable/kernels.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/exp.hpp"
#include "kernels/dispatch/kernel_table.hpp"
#include "kernels/family/layer_norm_row.hpp"
#include "kernels/family/scalar_math.hpp"
#include "kernels/sum.hpp"
#include "kernels/targets/portable/vec.hpp"

namespace kael::kernels::portable {
namespace {

// c (rows <= 2, w) for one panel: each output a chain over k in order, then + bias.
void panel_rows(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                std::int64_t rows, std::int64_t w, std::int64_t K, const float* bias, Epilogue epilogue) {
  float acc[2][kPanel] = {};
  for (std::int64_t k = 0; k < K; ++k) {
    const float* bk = b + k * ldb;
    for (std::int64_t r = 0; r < rows; ++r) {
      const float x = a[r * lda + k];
      for (std::int64_t j = 0; j < w; ++j) acc[r][j] += x * bk[j];
    }
  }
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < w; ++j) store_epilogue(c[r * ldc + j], acc[r][j] + (bias ? bias[j] : 0.0f), epilogue);
}

void softmax(float* out, const float* inp, std::int64_t n) {
  if (n <= 0) return;
  float max = inp[0];
  for (std::int64_t i = 1; i < n; ++i) max = inp[i] > max ? inp[i] : max;
  float sum = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) {
    out[i] = std::exp(inp[i] - max);
    sum += out[i];
  }
  const float scale = 1.0f / sum;
  for (std::int64_t i = 0; i < n; ++i) out[i] *= scale;
}

void gelu_new(float* out, const float* inp, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = gelu_tanh(inp[i]);
}

}  // namespace

void gemm_panels(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                 std::int64_t panel_stride, bool packed, std::int64_t M, std::int64_t N, std::int64_t K,
                 const float* bias, Epilogue epilogue) {
  for (std::int64_t col = 0; col < N; col += kPanel) {
    const std::int64_t w = std::min(kPanel, N - col);
    const float* panel = b + col / kPanel * panel_stride;
    const std::int64_t stride = packed && w < kPanel ? w : ldb;
    for (std::int64_t r = 0; r < M; r += 2)
      panel_rows(c + r * ldc + col, ldc, a + r * lda, lda, panel, stride, std::min<std::int64_t>(2, M - r), w, K,
                 bias ? bias + col : nullptr, epilogue);
  }
}

void gemv_rows(float* out, const float* x, const float* w, std::int64_t ldw, std::int64_t N, std::int64_t K,
               const float* bias, Epilogue epilogue) {
  // panel_rows' chains and expression, on w's columns: 16 outputs at a time, k in order.
  for (std::int64_t col = 0; col < N; col += kPanel) {
    const std::int64_t width = std::min(kPanel, N - col);
    float acc[kPanel] = {};
    for (std::int64_t k = 0; k < K; ++k) {
      const float xk = x[k];
      for (std::int64_t j = 0; j < width; ++j) acc[j] += xk * w[(col + j) * ldw + k];
    }
    for (std::int64_t j = 0; j < width; ++j)
      store_epilogue(out[col + j], acc[j] + (bias ? bias[col + j] : 0.0f), epilogue);
  }
}

void gemm_nt(float* out, std::int64_t ldo, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
             std::int64_t M, std::int64_t N, std::int64_t K, float scale) {
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) out[i * ldo + j] = vec::dot(a + i * lda, b + j * ldb, K) * scale;
}

void fill(KernelTable& table) {
  table.int8_dot = "scalar";
  table.gemm_panels = gemm_panels;
  table.gemm_nt = gemm_nt;
  table.gemv_rows = gemv_rows;
  table.dequantize_f16_panel = dequantize_f16_panel;
  table.f16_gemm = nullptr;
  table.quantize_rows = quantize_rows;
  table.int8_gemm = int8_gemm;
  table.softmax = softmax;
  table.gelu_new = gelu_new;
  table.exp = exp;
  table.sigmoid = sigmoid;
  table.tanh = tanh;
  table.sum = sum;
  table.layer_norm_row = layer_norm_row_lanes;
  table.gelu_backward = gelu_backward;
  table.adamw_update = adamw_update;
  table.sum_of_squares = sum_of_squares;
}

}  // namespace kael::kernels::portable
