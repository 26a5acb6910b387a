// The portable half of the kernels: plain C++ for baseline x86-64 (SSE2), used on CPUs
// without AVX2 or when KAEL_ISA=scalar. Loops are written with independent lanes so that g++
// vectorizes them without reordering any sum (no -ffast-math).
#include <cmath>

#include "kernels/isa.hpp"
#include "kernels/vec.hpp"

namespace kael::kernels::portable {
namespace {

float gelu(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

// c (rows <= 2, w) for one panel: each output a chain over k in order, then + bias.
void panel_rows(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                std::int64_t rows, std::int64_t w, std::int64_t K, const float* bias, Epilogue epilogue) {
  float acc[2][16] = {};
  for (std::int64_t k = 0; k < K; ++k) {
    const float* bk = b + k * ldb;
    for (std::int64_t r = 0; r < rows; ++r) {
      const float x = a[r * lda + k];
      for (std::int64_t j = 0; j < w; ++j) acc[r][j] += x * bk[j];
    }
  }
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < w; ++j) {
      float y = acc[r][j] + (bias ? bias[j] : 0.0f);
      if (epilogue == Epilogue::gelu) y = gelu(y);
      float& out = c[r * ldc + j];
      out = epilogue == Epilogue::residual ? out + y : y;
    }
}

}  // namespace

void gemm_panels(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                 std::int64_t panel_stride, bool packed, std::int64_t M, std::int64_t N, std::int64_t K,
                 const float* bias, Epilogue epilogue) {
  for (std::int64_t col = 0; col < N; col += 16) {
    const std::int64_t w = N - col < 16 ? N - col : 16;
    const float* panel = b + col / 16 * panel_stride;
    const std::int64_t stride = packed && w < 16 ? w : ldb;
    for (std::int64_t r = 0; r < M; r += 2)
      panel_rows(c + r * ldc + col, ldc, a + r * lda, lda, panel, stride, M - r < 2 ? M - r : 2, w, K,
                 bias ? bias + col : nullptr, epilogue);
  }
}

void gemm_nt(float* out, std::int64_t ldo, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
             std::int64_t M, std::int64_t N, std::int64_t K, float scale) {
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) out[i * ldo + j] = vec::dot(a + i * lda, b + j * ldb, K) * scale;
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
  for (std::int64_t i = 0; i < n; ++i) out[i] = gelu(inp[i]);
}

}  // namespace kael::kernels::portable
