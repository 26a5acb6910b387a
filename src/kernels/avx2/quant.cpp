// AVX2/F16C kernels for int8 and F16 weights (quant.hpp): the dequantization of one panel
// into F32 scratch (prefill, ragged panels), and the fused GEMV for 1-2 rows (decode), which
// converts 8 weights at a time in registers and feeds the FMAs directly, so the weights go
// from memory to the arithmetic without an F32 round trip. Both compute each weight as
// float(q) * scale (one rounding) and then the same ordered FMA chain as gemm_panels, so the
// fused and scratch paths give equal bits.
#include <immintrin.h>

#include <cstring>

#include "kernels/avx2/math.hpp"
#include "kernels/quant.hpp"

namespace kael::kernels::avx2 {
namespace {

// 8 weights starting at element i, as F32.
template <WeightType TYPE>
inline __m256 load8(const void* b, long i, __m256 scale) {
  if constexpr (TYPE == WeightType::int8) {
    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(static_cast<const std::int8_t*>(b) + i));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), scale);
  } else {
    (void)scale;
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const std::uint16_t*>(b) + i)));
  }
}

// c (MR, 16 NP) for NP full panels starting at b (elements 16 K apart): MR * NP * 2 FMA
// chains over k, then bias and the epilogue as in gemm_panels.
template <WeightType TYPE, int MR, int NP>
void fused_tile(float* c, long ldc, const float* a, long lda, const void* b, const float* scales, long K,
                const float* bias, Epilogue epilogue) {
  constexpr int kAcc = MR * NP * 2;
  __m256 acc[kAcc], scale[NP * 2];
#pragma GCC unroll 16
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm256_setzero_ps();
#pragma GCC unroll 8
  for (int i = 0; i < NP * 2; ++i)
    scale[i] = TYPE == WeightType::int8 ? _mm256_loadu_ps(scales + 8 * i) : _mm256_setzero_ps();
  for (long k = 0; k < K; ++k) {
    __m256 row[NP * 2];
#pragma GCC unroll 8
    for (int i = 0; i < NP * 2; ++i) row[i] = load8<TYPE>(b, (i / 2) * 16 * K + k * 16 + 8 * (i % 2), scale[i]);
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

template <WeightType TYPE, int MR>
void fused_rows(float* c, long ldc, const float* a, long lda, const void* b, const float* scales, long panels,
                long K, const float* bias, Epilogue epilogue) {
  const std::size_t elem = TYPE == WeightType::int8 ? 1 : 2;
  const auto at = [&](long p) { return static_cast<const char*>(b) + static_cast<std::size_t>(p * 16 * K) * elem; };
  const auto sc = [&](long p) { return scales ? scales + 16 * p : nullptr; };
  const auto bs = [&](long p) { return bias ? bias + 16 * p : nullptr; };
  long p = 0;
  for (; p + 4 <= panels; p += 4)
    fused_tile<TYPE, MR, 4>(c + 16 * p, ldc, a, lda, at(p), sc(p), K, bs(p), epilogue);
  for (; p < panels; ++p) fused_tile<TYPE, MR, 1>(c + 16 * p, ldc, a, lda, at(p), sc(p), K, bs(p), epilogue);
}

}  // namespace

void narrow_gemv(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const void* b, const float* scales,
                 WeightType type, std::int64_t M, std::int64_t panels, std::int64_t K, const float* bias,
                 Epilogue epilogue) {
  for (std::int64_t r = 0; r < M; r += 2) {
    float* cr = c + r * ldc;
    const float* ar = a + r * lda;
    const bool two = M - r >= 2;
    if (type == WeightType::int8) {
      if (two) fused_rows<WeightType::int8, 2>(cr, ldc, ar, lda, b, scales, panels, K, bias, epilogue);
      else fused_rows<WeightType::int8, 1>(cr, ldc, ar, lda, b, scales, panels, K, bias, epilogue);
    } else {
      if (two) fused_rows<WeightType::f16, 2>(cr, ldc, ar, lda, b, scales, panels, K, bias, epilogue);
      else fused_rows<WeightType::f16, 1>(cr, ldc, ar, lda, b, scales, panels, K, bias, epilogue);
    }
  }
}

void dequantize_panel(float* dst, const void* panel, const float* scales, WeightType type, std::int64_t K,
                      std::int64_t w) {
  const std::int64_t n = K * w;
  if (type == WeightType::int8) {
    const auto* q = static_cast<const std::int8_t*>(panel);
    if (w == kPanel) {
      const __m256 s0 = _mm256_loadu_ps(scales), s1 = _mm256_loadu_ps(scales + 8);
      for (std::int64_t k = 0; k < K; ++k) {
        const __m128i row = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + k * kPanel));
        const __m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(row));
        const __m256 hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(row, 8)));
        _mm256_storeu_ps(dst + k * kPanel, _mm256_mul_ps(lo, s0));
        _mm256_storeu_ps(dst + k * kPanel + 8, _mm256_mul_ps(hi, s1));
      }
      return;
    }
    for (std::int64_t k = 0; k < K; ++k)  // ragged last panel: rarely run, plain code
      for (std::int64_t j = 0; j < w; ++j) dst[k * w + j] = static_cast<float>(q[k * w + j]) * scales[j];
    return;
  }
  const auto* h = static_cast<const std::uint16_t*>(panel);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  if (i < n) {
    alignas(16) std::uint16_t tail[8] = {};
    std::memcpy(tail, h + i, static_cast<std::size_t>(n - i) * sizeof(std::uint16_t));
    alignas(32) float f[8];
    _mm256_store_ps(f, _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(tail))));
    std::memcpy(dst + i, f, static_cast<std::size_t>(n - i) * sizeof(float));
  }
}

}  // namespace kael::kernels::avx2
