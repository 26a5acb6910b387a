// The AVX-512 exp kernel (exp.hpp): avx2/exp.cpp's operations on 16 lanes (the same bits).
#include <immintrin.h>

#include "kernels/avx512/math.hpp"
#include "kernels/exp.hpp"

namespace kael::kernels::avx512 {
namespace {

inline __m512 exp16_ieee(__m512 x) {
  // max/min return their second operand when either is NaN, so NaN passes the clamp.
  x = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
  const __m512 round = _mm512_set1_ps(12582912.0f);  // 1.5 * 2^23
  const __m512 t = _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), round);
  const __m512 n = _mm512_sub_ps(t, round);
  const __m512i ni = _mm512_sub_epi32(_mm512_castps_si512(t), _mm512_castps_si512(round));
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-0.693145751953125f), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(-1.428606765330187045e-6f), r);
  const __m512 p = expf_polynomial16(r);
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  const __m512i n1 = _mm512_srai_epi32(ni, 1), n2 = _mm512_sub_epi32(ni, n1);
  const __m512i bias = _mm512_set1_epi32(127);
  const __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23));
  const __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
  return _mm512_mul_ps(_mm512_mul_ps(y, s1), s2);
}

}  // namespace

void exp(float* out, const float* inp, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, exp16_ieee(_mm512_loadu_ps(inp + i)));
  if (i < n) {
    const __mmask16 mask = tail_mask(n - i);
    _mm512_mask_storeu_ps(out + i, mask, exp16_ieee(_mm512_maskz_loadu_ps(mask, inp + i)));
  }
}

}  // namespace kael::kernels::avx512
