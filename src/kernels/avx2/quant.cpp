// AVX2/F16C kernels for F16 weights (quant.hpp): the conversion of one panel into F32 scratch
// (prefill, ragged panels), and the fused GEMV for 1-2 rows (decode), which converts 8 weights
// at a time in registers and feeds the FMAs directly, so the weights go from memory to the
// arithmetic without an F32 round trip. Both convert exactly and then run the same ordered FMA
// chain as gemm_panels, so the fused and scratch paths give equal bits.
#include <immintrin.h>

#include <cstring>

#include "kernels/avx2/math.hpp"
#include "kernels/avx2/kernels.hpp"

namespace kael::kernels::avx2 {
namespace {

// 8 weights starting at element i, as F32.
inline __m256 load8(const std::uint16_t* b, long i) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
}

// c (MR, 16 NP) for NP full panels starting at b (elements 16 K apart): MR * NP * 2 FMA
// chains over k, then bias and the epilogue as in gemm_panels.
template <int MR, int NP>
void fused_tile(float* c, long ldc, const float* a, long lda, const std::uint16_t* b, long K, const float* bias,
                Epilogue epilogue) {
  constexpr int kAcc = MR * NP * 2;
  __m256 acc[kAcc];
#pragma GCC unroll 16
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm256_setzero_ps();
  for (long k = 0; k < K; ++k) {
    __m256 row[NP * 2];
#pragma GCC unroll 8
    for (int i = 0; i < NP * 2; ++i) row[i] = load8(b, (i / 2) * 16 * K + k * 16 + 8 * (i % 2));
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m256 x = _mm256_broadcast_ss(a + r * lda + k);
#pragma GCC unroll 8
      for (int i = 0; i < NP * 2; ++i) acc[r * NP * 2 + i] = _mm256_fmadd_ps(x, row[i], acc[r * NP * 2 + i]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < kAcc; ++i) {
    const int r = i / (NP * 2), col = 8 * (i % (NP * 2));
    finish<false>(c + r * ldc + col, acc[i], bias ? bias + col : nullptr, epilogue, _mm256_setzero_si256());
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
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load8(h, i));
  if (i < n) {
    alignas(16) std::uint16_t tail[8] = {};
    std::memcpy(tail, h + i, static_cast<std::size_t>(n - i) * sizeof(std::uint16_t));
    alignas(32) float f[8];
    _mm256_store_ps(f, _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(tail))));
    std::memcpy(dst + i, f, static_cast<std::size_t>(n - i) * sizeof(float));
  }
}

}  // namespace kael::kernels::avx2
