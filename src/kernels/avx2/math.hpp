// Vector exp, GELU, tail masks and the output epilogue (bias, GELU, residual, store) shared by
// the F32 and quantized AVX2 kernels. Only avx2/*.cpp may include this: it is compiled with
// -mavx2 -mfma, and its functions are `static` so no baseline unit can ever link them.
#pragma once

#include <immintrin.h>

#include "kernels/gemm.hpp"

namespace kael::kernels::avx2 {

// Cephes' expf polynomial P(r), e^r = 1 + r + r^2 P(r) for |r| <= ln2 / 2: shared by exp8 and
// the tensor library's exp (avx2/exp.cpp), which differ only in range reduction and scaling.
static inline __m256 expf_polynomial8(__m256 r) {
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  return p;
}

// e^x, Cephes' expf: x = n ln2 + r with |r| <= ln2 / 2, a degree-6 polynomial for e^r, and 2^n
// put into the exponent bits; about 2 ulp. x is clamped to [-87.3, 88.3], where both e^x and
// 2^n stay normal floats; below -87.3 the result is 0 (softmax relies on e^-inf = 0).
static inline __m256 exp8(__m256 x) {
  const __m256 underflow = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_LT_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // ln2 in two parts, so n * ln2_hi is exact and r keeps its low bits.
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = expf_polynomial8(r);
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i exponent = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(underflow, _mm256_mul_ps(p, _mm256_castsi256_ps(exponent)));
}

// gelu_new(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3). Since
// 0.5 (1 + tanh(u)) = 1 / (1 + e^(-2u)), this is x / (1 + e^(-2u)): one exp, one division, and
// no cancellation near u = 0.
static inline __m256 gelu8(__m256 x) {
  const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
  const __m256 u = _mm256_mul_ps(_mm256_set1_ps(0.7978845608028654f),
                                 _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), x3, x));
  const __m256 e = exp8(_mm256_mul_ps(_mm256_set1_ps(-2.0f), u));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

// Sum of the eight lanes, in a fixed order.
static inline float hsum8(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

static inline float hmax8(__m256 v) {
  const __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(t, _mm_movehdup_ps(t)));
}

// Lanes [0, count) set, for masked loads and stores of a ragged tail (count in 0..8).
static inline __m256i tail_mask(long count) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), lanes);
}

// Stores one 8-wide group of outputs after the epilogue; `mask` set for ragged groups.
template <bool MASKED>
static inline void finish(float* c, __m256 y, const float* bias, Epilogue epilogue, __m256i mask) {
  if (bias != nullptr) y = _mm256_add_ps(y, MASKED ? _mm256_maskload_ps(bias, mask) : _mm256_loadu_ps(bias));
  if (epilogue == Epilogue::gelu) y = gelu8(y);
  if (epilogue == Epilogue::residual)
    y = _mm256_add_ps(MASKED ? _mm256_maskload_ps(c, mask) : _mm256_loadu_ps(c), y);
  if (MASKED)
    _mm256_maskstore_ps(c, mask, y);
  else
    _mm256_storeu_ps(c, y);
}

}  // namespace kael::kernels::avx2
