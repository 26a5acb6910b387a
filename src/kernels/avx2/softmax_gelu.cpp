// AVX2 softmax and GELU on the vector exp of math.hpp.
#include <immintrin.h>

#include "kernels/avx2/math.hpp"
#include "kernels/avx2/kernels.hpp"

namespace kael::kernels::avx2 {

void softmax(float* out, const float* inp, std::int64_t n) {
  if (n <= 0) return;
  const long full = n / 8 * 8;
  const __m256i tail = tail_mask(n - full);
  __m256 vmax = _mm256_set1_ps(-__builtin_inff());
  for (long i = 0; i < full; i += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(inp + i));
  float max = hmax8(vmax);
  for (long i = full; i < n; ++i) max = inp[i] > max ? inp[i] : max;

  const __m256 shift = _mm256_set1_ps(max);
  __m256 vsum = _mm256_setzero_ps();
  for (long i = 0; i < full; i += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(inp + i), shift));
    _mm256_storeu_ps(out + i, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  if (full < n) {
    // Masked-off lanes load 0 and give e^(0 - max); they are dropped from the sum and the store.
    const __m256 e = exp8(_mm256_sub_ps(_mm256_maskload_ps(inp + full, tail), shift));
    const __m256 kept = _mm256_and_ps(e, _mm256_castsi256_ps(tail));
    _mm256_maskstore_ps(out + full, tail, kept);
    vsum = _mm256_add_ps(vsum, kept);
  }
  const __m256 scale = _mm256_set1_ps(1.0f / hsum8(vsum));
  for (long i = 0; i < full; i += 8) _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(out + i), scale));
  if (full < n)
    _mm256_maskstore_ps(out + full, tail, _mm256_mul_ps(_mm256_maskload_ps(out + full, tail), scale));
}

void gelu_new(float* out, const float* inp, std::int64_t n) {
  const long full = n / 8 * 8;
  for (long i = 0; i < full; i += 8) _mm256_storeu_ps(out + i, gelu8(_mm256_loadu_ps(inp + i)));
  if (full < n) {
    const __m256i tail = tail_mask(n - full);
    _mm256_maskstore_ps(out + full, tail, gelu8(_mm256_maskload_ps(inp + full, tail)));
  }
}

}  // namespace kael::kernels::avx2
