// AVX-512 softmax and GELU on the vector exp of math.hpp.
#include "kernels/avx512/kernels.hpp"
#include "kernels/avx512/math.hpp"

namespace kael::kernels::avx512 {

void softmax(float* out, const float* inp, std::int64_t n) {
  if (n <= 0) return;
  const long full = n / 16 * 16;
  const __mmask16 tail = tail_mask(n - full);
  __m512 vmax = _mm512_set1_ps(-__builtin_inff());
  for (long i = 0; i < full; i += 16) vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(inp + i));
  if (full < n) vmax = _mm512_mask_max_ps(vmax, tail, vmax, _mm512_maskz_loadu_ps(tail, inp + full));
  const __m512 shift = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
  __m512 vsum = _mm512_setzero_ps();
  for (long i = 0; i < full; i += 16) {
    const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(inp + i), shift));
    _mm512_storeu_ps(out + i, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  if (full < n) {
    const __m512 e = _mm512_maskz_mov_ps(tail, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, inp + full), shift)));
    _mm512_mask_storeu_ps(out + full, tail, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  const __m512 scale = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vsum));
  for (long i = 0; i < full; i += 16) _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_loadu_ps(out + i), scale));
  if (full < n) _mm512_mask_storeu_ps(out + full, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, out + full), scale));
}

void gelu_new(float* out, const float* inp, std::int64_t n) {
  const long full = n / 16 * 16;
  for (long i = 0; i < full; i += 16) _mm512_storeu_ps(out + i, gelu16(_mm512_loadu_ps(inp + i)));
  if (full < n) {
    const __mmask16 tail = tail_mask(n - full);
    _mm512_mask_storeu_ps(out + full, tail, gelu16(_mm512_maskz_loadu_ps(tail, inp + full)));
  }
}

}  // namespace kael::kernels::avx512
