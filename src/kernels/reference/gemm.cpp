// Plain references for gemm.hpp: the obvious loops, sums in double, no threads.
#include "kernels/gemm.hpp"
#include "kernels/family/scalar_math.hpp"

namespace kael::kernels::ref {

void linear_packed(float* out, const float* inp, const float* packed, const float* bias, std::int64_t T,
                   std::int64_t K, std::int64_t N, Epilogue epilogue) {
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t n = 0; n < N; ++n) {
      // Column n lives in panel n / 16, of width w, at column n % 16.
      const std::int64_t panel = n / kPanel, w = N - panel * kPanel < kPanel ? N - panel * kPanel : kPanel;
      const float* column = packed + panel * kPanel * K + n % kPanel;
      double y = bias ? bias[n] : 0.0;
      for (std::int64_t k = 0; k < K; ++k) y += static_cast<double>(inp[t * K + k]) * column[k * w];
      store_epilogue(out[t * N + n], y, epilogue);
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
  gemm(out, ldo, a, lda, false, b, ldb, false, M, N, K, false);
}

void gemm_tn(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
             std::int64_t M, std::int64_t N, std::int64_t K, bool accumulate) {
  gemm(c, ldc, a, lda, true, b, ldb, false, M, N, K, accumulate);
}

void gemm(float* c, std::int64_t ldc, const float* a, std::int64_t lda, bool trans_a, const float* b,
          std::int64_t ldb, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, bool accumulate,
          const float* bias) {
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      double sum = bias != nullptr ? bias[j] : 0.0;
      for (std::int64_t k = 0; k < K; ++k)
        sum += static_cast<double>(trans_a ? a[k * lda + i] : a[i * lda + k]) * (trans_b ? b[j * ldb + k] : b[k * ldb + j]);
      store_epilogue(c[i * ldc + j], sum, accumulate ? Epilogue::residual : Epilogue::store);
    }
}

}  // namespace kael::kernels::ref
