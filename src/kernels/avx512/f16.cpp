// AVX-512 kernels for F16 weights (quant.hpp): the panel conversion into F32 scratch
// (prefill) and the fused GEMV for 1-2 rows (decode), which converts one panel row of 16
// weights per vcvtph2ps and feeds the FMAs directly. Both convert exactly and run the same
// ordered FMA chain as gemm_panels, so the fused and scratch paths give equal bits.
#include <immintrin.h>

#include "kernels/avx512/kernels.hpp"
#include "kernels/avx512/math.hpp"

namespace kael::kernels::avx512 {
namespace {

// 16 weights starting at element i, as F32.
inline __m512 load16(const std::uint16_t* b, long i) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i)));
}

// c (MR, 16 NP) for NP full panels starting at b (elements 16 K apart).
template <int MR, int NP>
void fused_tile(float* c, long ldc, const float* a, long lda, const std::uint16_t* b, long K, const float* bias,
                Epilogue epilogue) {
  __m512 acc[MR * NP];
#pragma GCC unroll 16
  for (int i = 0; i < MR * NP; ++i) acc[i] = _mm512_setzero_ps();
  for (long k = 0; k < K; ++k) {
    __m512 row[NP];
#pragma GCC unroll 8
    for (int p = 0; p < NP; ++p) row[p] = load16(b, p * 16 * K + k * 16);
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) {
      const __m512 x = _mm512_set1_ps(a[r * lda + k]);
#pragma GCC unroll 8
      for (int p = 0; p < NP; ++p) acc[r * NP + p] = _mm512_fmadd_ps(x, row[p], acc[r * NP + p]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR * NP; ++i) {
    const int r = i / NP, col = 16 * (i % NP);
    finish(c + r * ldc + col, acc[i], bias ? bias + col : nullptr, epilogue, tail_mask(16));
  }
}

template <int MR>
void fused_rows(float* c, long ldc, const float* a, long lda, const std::uint16_t* b, long panels, long K,
                const float* bias, Epilogue epilogue) {
  const auto bs = [&](long p) { return bias ? bias + 16 * p : nullptr; };
  long p = 0;
  for (; p + 4 <= panels; p += 4) fused_tile<MR, 4>(c + 16 * p, ldc, a, lda, b + p * 16 * K, K, bs(p), epilogue);
  for (; p < panels; ++p) fused_tile<MR, 1>(c + 16 * p, ldc, a, lda, b + p * 16 * K, K, bs(p), epilogue);
}

}  // namespace

void f16_gemv(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const std::uint16_t* b, std::int64_t M,
              std::int64_t panels, std::int64_t K, const float* bias, Epilogue epilogue) {
  for (std::int64_t r = 0; r < M; r += 2) {
    if (M - r >= 2)
      fused_rows<2>(c + r * ldc, ldc, a + r * lda, lda, b, panels, K, bias, epilogue);
    else
      fused_rows<1>(c + r * ldc, ldc, a + r * lda, lda, b, panels, K, bias, epilogue);
  }
}

void dequantize_f16_panel(float* dst, const std::uint16_t* h, std::int64_t K, std::int64_t w) {
  const std::int64_t n = K * w;
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, load16(h, i));
  if (i < n) {
    const __mmask16 tail = tail_mask(n - i);
    const __m256i bits = _mm256_maskz_loadu_epi16(tail, h + i);
    _mm512_mask_storeu_ps(dst + i, tail, _mm512_cvtph_ps(bits));
  }
}

}  // namespace kael::kernels::avx512
