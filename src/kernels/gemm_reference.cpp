// Plain references for gemm.hpp: the obvious loops, sums in double, no threads.
#include <cmath>
#include <numbers>

#include "kernels/gemm.hpp"

namespace kael::kernels::ref {

void linear_packed(float* out, const float* inp, const float* packed, const float* bias, std::int64_t T,
                   std::int64_t K, std::int64_t N, Epilogue epilogue) {
  const double k_gelu = std::sqrt(2.0 / std::numbers::pi);
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t n = 0; n < N; ++n) {
      // Column n lives in panel n / 16, of width w, at column n % 16.
      const std::int64_t panel = n / kPanel, w = N - panel * kPanel < kPanel ? N - panel * kPanel : kPanel;
      const float* column = packed + panel * kPanel * K + n % kPanel;
      double y = bias ? bias[n] : 0.0;
      for (std::int64_t k = 0; k < K; ++k) y += static_cast<double>(inp[t * K + k]) * column[k * w];
      if (epilogue == Epilogue::gelu) y = 0.5 * y * (1.0 + std::tanh(k_gelu * (y + 0.044715 * y * y * y)));
      float& o = out[t * N + n];
      o = static_cast<float>(epilogue == Epilogue::residual ? o + y : y);
    }
}

void gemm_nt(float* out, std::int64_t ldo, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
             std::int64_t M, std::int64_t N, std::int64_t K, float scale) {
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      double sum = 0.0;
      for (std::int64_t k = 0; k < K; ++k) sum += static_cast<double>(a[i * lda + k]) * b[j * ldb + k];
      out[i * ldo + j] = static_cast<float>(sum * scale);
    }
}

void gemm_nn(float* out, std::int64_t ldo, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
             std::int64_t M, std::int64_t N, std::int64_t K) {
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      double sum = 0.0;
      for (std::int64_t k = 0; k < K; ++k) sum += static_cast<double>(a[i * lda + k]) * b[k * ldb + j];
      out[i * ldo + j] = static_cast<float>(sum);
    }
}

}  // namespace kael::kernels::ref
