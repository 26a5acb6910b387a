// The AVX-512 sum (sum.hpp): 32 lanes in four registers of 8 doubles.
#include <immintrin.h>

#include <algorithm>

#include "kernels/avx512/math.hpp"
#include "kernels/sum.hpp"

namespace kael::kernels::avx512 {

double sum(const float* x, std::int64_t n) {
  // acc[k] holds lanes 8k .. 8k + 7.
  __m512d acc[4] = {_mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd()};
  const auto add16 = [&acc](int k, __m512 v) {
    acc[k] = _mm512_add_pd(acc[k], _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    acc[k + 1] = _mm512_add_pd(acc[k + 1], _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
  };
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    add16(0, _mm512_loadu_ps(x + i));
    add16(2, _mm512_loadu_ps(x + i + 16));
  }
  // The ragged end: lanes past n add +0, which leaves a lane (never -0: it starts at +0) as it is.
  if (i < n) {
    add16(0, _mm512_maskz_loadu_ps(tail_mask(std::min<std::int64_t>(n - i, 16)), x + i));
    if (i + 16 < n) add16(2, _mm512_maskz_loadu_ps(tail_mask(n - i - 16), x + i + 16));
  }
  alignas(64) double lanes[32];
  for (int k = 0; k < 4; ++k) _mm512_store_pd(lanes + 8 * k, acc[k]);
  double total = 0;
  for (const double lane : lanes) total += lane;
  return total;
}

}  // namespace kael::kernels::avx512
