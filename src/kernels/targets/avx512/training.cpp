// AVX-512 training kernels (training.hpp): GELU's backward on the vector exp of family/math.hpp, and
// the AdamW update and sum of squares lane for lane as the portable loops (equal bits).
#include "kernels/targets/avx512/kernels.hpp"
#include "kernels/targets/avx512/vec.hpp"
#include "kernels/family/math.hpp"

namespace kael::kernels::avx512 {
namespace {

// gelu_new'(x) with s = sigmoid(2u) = (1 + tanh u) / 2 and 1 - tanh^2 u = 4 s (1 - s):
// s + 2 x s (1 - s) du, u = sqrt(2/pi) (x + 0.044715 x^3), du = sqrt(2/pi) (1 + 3 0.044715 x^2).
// 1 - s = e s with e = e^(-2u) avoids the cancellation of 1 - s near s = 1.
inline __m512 gelu_derivative16(__m512 x) {
  const __m512 k = _mm512_set1_ps(0.7978845608028654f), cubic = _mm512_set1_ps(0.044715f);
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 x2 = _mm512_mul_ps(x, x);
  const __m512 u = _mm512_mul_ps(k, _mm512_fmadd_ps(_mm512_mul_ps(cubic, x2), x, x));
  const __m512 du = _mm512_mul_ps(k, _mm512_fmadd_ps(_mm512_set1_ps(3.0f * 0.044715f), x2, one));
  const __m512 e = family::exp_clamped<Vec>(_mm512_mul_ps(_mm512_set1_ps(-2.0f), u));
  const __m512 s = _mm512_div_ps(one, _mm512_add_ps(one, e));
  const __m512 s_complement = _mm512_mul_ps(e, s);
  const __m512 slope = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(2.0f), x), _mm512_mul_ps(du, s_complement));
  return _mm512_fmadd_ps(slope, s, s);
}

// One AdamW element group, in the portable loop's order of roundings.
inline void adamw16(float* param, float* m, float* v, const float* grad, const AdamWScalars& s, __mmask16 mask) {
  const __m512 g = _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, grad), _mm512_set1_ps(s.grad_scale));
  __m512 mi = _mm512_maskz_loadu_ps(mask, m), vi = _mm512_maskz_loadu_ps(mask, v);
  const __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, param), _mm512_set1_ps(s.decay));
  mi = _mm512_add_ps(mi, _mm512_mul_ps(_mm512_set1_ps(s.one_minus_beta1), _mm512_sub_ps(g, mi)));
  vi = _mm512_add_ps(_mm512_mul_ps(vi, _mm512_set1_ps(s.beta2)),
                     _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(s.one_minus_beta2), g), g));
  const __m512 denom =
      _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vi), _mm512_set1_ps(s.bias_correction2_sqrt)), _mm512_set1_ps(s.eps));
  const __m512 p = _mm512_add_ps(x, _mm512_mul_ps(_mm512_set1_ps(s.neg_step_size), _mm512_div_ps(mi, denom)));
  _mm512_mask_storeu_ps(m, mask, mi);
  _mm512_mask_storeu_ps(v, mask, vi);
  _mm512_mask_storeu_ps(param, mask, p);
}

}  // namespace

void gelu_backward(float* dinp, const float* inp, const float* dout, std::int64_t n) {
  for (long i = 0; i < n; i += 16) {
    const __mmask16 mask = Vec::tail(n - i);
    const __m512 d = gelu_derivative16(_mm512_maskz_loadu_ps(mask, inp + i));
    _mm512_mask_storeu_ps(dinp + i, mask, _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, dout + i), d));
  }
}

void adamw_update(float* param, float* m, float* v, const float* grad, std::int64_t n, const AdamWScalars& s) {
  for (long i = 0; i < n; i += 16) adamw16(param + i, m + i, v + i, grad + i, s, Vec::tail(n - i));
}

double sum_of_squares(const float* x, std::int64_t n) {
  // Lanes 0-7 and 8-15 of the portable loop's 16.
  __m512d low = _mm512_setzero_pd(), high = _mm512_setzero_pd();
  for (long i = 0; i < n; i += 16) {
    const __m512 v = _mm512_maskz_loadu_ps(Vec::tail(n - i), x + i);
    const __m512d a = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    const __m512d b = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    low = _mm512_fmadd_pd(a, a, low);
    high = _mm512_fmadd_pd(b, b, high);
  }
  alignas(64) double lanes[16];
  _mm512_store_pd(lanes, low);
  _mm512_store_pd(lanes + 8, high);
  double total = 0;
  for (double lane : lanes) total += lane;
  return total;
}

}  // namespace kael::kernels::avx512
