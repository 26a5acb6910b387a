// The AVX2 exp, sigmoid and tanh kernels (exp.hpp): the portable method on 8 lanes with FMAs,
// which makes the reduction x - n ln 2 exact in its first step. avx512/exp.cpp does the same
// operations on 16 lanes, so both give the same bits.
#include <immintrin.h>

#include "kernels/avx2/math.hpp"
#include "kernels/exp.hpp"

namespace kael::kernels::avx2 {
namespace {

inline __m256 exp8_ieee(__m256 x) {
  // max/min return their second operand when either is NaN, so NaN passes the clamp.
  x = _mm256_min_ps(_mm256_set1_ps(89.0f), _mm256_max_ps(_mm256_set1_ps(-104.0f), x));
  const __m256 round = _mm256_set1_ps(12582912.0f);  // 1.5 * 2^23
  const __m256 t = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), round);
  const __m256 n = _mm256_sub_ps(t, round);
  const __m256i ni = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_castps_si256(round));
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-0.693145751953125f), x);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(-1.428606765330187045e-6f), r);
  const __m256 p = expf_polynomial8(r);
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(y, s1), s2);
}


// 1 / (1 + e^-x) (exp.hpp).
inline __m256 sigmoid8(__m256 x) {
  const __m256 minus_x = _mm256_xor_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u))));
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, exp8_ieee(minus_x)));
}

// Cephes' tanhf (exp.hpp), its polynomial with FMAs.
inline __m256 tanh8(__m256 x) {
  const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u)));
  const __m256 ax = _mm256_andnot_ps(sign, x), z = _mm256_mul_ps(ax, ax);
  __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(-5.70498872745e-3f), z, _mm256_set1_ps(2.06390887954e-2f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-5.37397155531e-2f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(1.33314422036e-1f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-3.33332819422e-1f));
  const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), ax, ax);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 large =
      _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(exp8_ieee(_mm256_add_ps(ax, ax)), one)));
  const __m256 magnitude = _mm256_blendv_ps(large, small, _mm256_cmp_ps(ax, _mm256_set1_ps(0.625f), _CMP_LT_OQ));
  return _mm256_or_ps(magnitude, _mm256_and_ps(x, sign));
}

// out (n) = f(inp) 8 lanes at a time, the ragged end through masked loads and stores.
template <__m256 (*f)(__m256)>
void rows8(float* out, const float* inp, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, f(_mm256_loadu_ps(inp + i)));
  if (i < n) {
    const __m256i mask = tail_mask(n - i);
    _mm256_maskstore_ps(out + i, mask, f(_mm256_maskload_ps(inp + i, mask)));
  }
}

}  // namespace

void exp(float* out, const float* inp, std::int64_t n) { rows8<exp8_ieee>(out, inp, n); }
void sigmoid(float* out, const float* inp, std::int64_t n) { rows8<sigmoid8>(out, inp, n); }
void tanh(float* out, const float* inp, std::int64_t n) { rows8<tanh8>(out, inp, n); }

}  // namespace kael::kernels::avx2
