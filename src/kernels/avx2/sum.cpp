// The AVX2 sum (sum.hpp): 32 lanes in eight registers of 4 doubles.
#include <immintrin.h>

#include "kernels/avx2/math.hpp"
#include "kernels/sum.hpp"

namespace kael::kernels::avx2 {

double sum(const float* x, std::int64_t n) {
  // acc[k] holds lanes 4k .. 4k + 3.
  __m256d acc[8];
  for (__m256d& a : acc) a = _mm256_setzero_pd();
  const auto add8 = [&acc](int k, __m256 v) {
    acc[k] = _mm256_add_pd(acc[k], _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    acc[k + 1] = _mm256_add_pd(acc[k + 1], _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  };
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k) add8(2 * k, _mm256_loadu_ps(x + i + 8 * k));
  // The ragged end: lanes past n add +0, which leaves a lane (never -0: it starts at +0) as it is.
  for (int k = 0; i + 8 * k < n; ++k) add8(2 * k, _mm256_maskload_ps(x + i + 8 * k, tail_mask(n - i - 8 * k)));
  alignas(32) double lanes[32];
  for (int k = 0; k < 8; ++k) _mm256_store_pd(lanes + 4 * k, acc[k]);
  double total = 0;
  for (const double lane : lanes) total += lane;
  return total;
}

}  // namespace kael::kernels::avx2
