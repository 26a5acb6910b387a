// Vector exp, GELU, tail masks and the output epilogue for the AVX-512 kernels: the AVX2
// forms of avx2/math.hpp on 16 lanes, operation for operation, so both give the same bits.
// Only avx512/*.cpp may include this (compiled with -mavx512f ...); its functions are
// `static` so no other unit can link them.
#pragma once

#include <immintrin.h>

#include "kernels/gemm.hpp"

namespace kael::kernels::avx512 {

// Cephes' expf polynomial, as avx2's expf_polynomial8.
static inline __m512 expf_polynomial16(__m512 r) {
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  return p;
}

// e^x as avx2's exp8 (Cephes' expf, about 2 ulp; 0 below -87.3).
static inline __m512 exp16(__m512 x) {
  const __mmask16 underflow = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_LT_OQ);
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.3f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = expf_polynomial16(r);
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512i exponent = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mul_ps(static_cast<__mmask16>(~underflow), p, _mm512_castsi512_ps(exponent));
}

// gelu_new(x) = x / (1 + e^(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3), as avx2's gelu8.
static inline __m512 gelu16(__m512 x) {
  const __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
  const __m512 u = _mm512_mul_ps(_mm512_set1_ps(0.7978845608028654f),
                                 _mm512_fmadd_ps(_mm512_set1_ps(0.044715f), x3, x));
  const __m512 e = exp16(_mm512_mul_ps(_mm512_set1_ps(-2.0f), u));
  return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

// Lanes [0, count) set (count in 0..16).
static inline __mmask16 tail_mask(long count) {
  return count >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << count) - 1u);
}

// Stores 16 outputs (the lanes of `mask`) after the epilogue: + bias, GELU, or + the residual.
static inline void finish(float* c, __m512 y, const float* bias, Epilogue epilogue, __mmask16 mask) {
  if (bias != nullptr) y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(mask, bias));
  if (epilogue == Epilogue::gelu) y = gelu16(y);
  if (epilogue == Epilogue::residual) y = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, c), y);
  _mm512_mask_storeu_ps(c, mask, y);
}

}  // namespace kael::kernels::avx512
