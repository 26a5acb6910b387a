// The AVX-512 exp, sigmoid and tanh kernels (exp.hpp): avx2/exp.cpp's operations on 16 lanes
// (the same bits).
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


// 1 / (1 + e^-x) (exp.hpp), as avx2's sigmoid8.
inline __m512 sigmoid16(__m512 x) {
  const __m512 minus_x = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32(static_cast<int>(0x80000000u))));
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_div_ps(one, _mm512_add_ps(one, exp16_ieee(minus_x)));
}

// Cephes' tanhf (exp.hpp), as avx2's tanh8.
inline __m512 tanh16(__m512 x) {
  const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  const __m512 ax = _mm512_castsi512_ps(_mm512_andnot_si512(sign, _mm512_castps_si512(x)));
  const __m512 z = _mm512_mul_ps(ax, ax);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(-5.70498872745e-3f), z, _mm512_set1_ps(2.06390887954e-2f));
  p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(-5.37397155531e-2f));
  p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(1.33314422036e-1f));
  p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(-3.33332819422e-1f));
  const __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(p, z), ax, ax);
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 large =
      _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(exp16_ieee(_mm512_add_ps(ax, ax)), one)));
  const __m512 magnitude =
      _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, _mm512_set1_ps(0.625f), _CMP_LT_OQ), large, small);
  return _mm512_castsi512_ps(
      _mm512_or_si512(_mm512_castps_si512(magnitude), _mm512_and_si512(_mm512_castps_si512(x), sign)));
}

// out (n) = f(inp) 16 lanes at a time, the ragged end through masked loads and stores.
template <__m512 (*f)(__m512)>
void rows16(float* out, const float* inp, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, f(_mm512_loadu_ps(inp + i)));
  if (i < n) {
    const __mmask16 mask = tail_mask(n - i);
    _mm512_mask_storeu_ps(out + i, mask, f(_mm512_maskz_loadu_ps(mask, inp + i)));
  }
}

}  // namespace

void exp(float* out, const float* inp, std::int64_t n) { rows16<exp16_ieee>(out, inp, n); }
void sigmoid(float* out, const float* inp, std::int64_t n) { rows16<sigmoid16>(out, inp, n); }
void tanh(float* out, const float* inp, std::int64_t n) { rows16<tanh16>(out, inp, n); }

}  // namespace kael::kernels::avx512
