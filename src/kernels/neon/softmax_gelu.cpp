// NEON softmax and GELU on the vector exp of math.hpp.
#include <arm_neon.h>

#include "kernels/neon/kernels.hpp"
#include "kernels/neon/math.hpp"

namespace kael::kernels::neon {

void softmax(float* out, const float* inp, std::int64_t n) {
  if (n <= 0) return;
  const long full = n / 4 * 4, rest = n - full;
  float32x4_t vmax = vdupq_n_f32(-__builtin_inff());
  for (long i = 0; i < full; i += 4) vmax = vmaxq_f32(vmax, vld1q_f32(inp + i));
  float max = vmaxvq_f32(vmax);
  for (long i = full; i < n; ++i) max = inp[i] > max ? inp[i] : max;

  const float32x4_t shift = vdupq_n_f32(max);
  float32x4_t vsum = vdupq_n_f32(0.0f);
  for (long i = 0; i < full; i += 4) {
    const float32x4_t e = exp4(vsubq_f32(vld1q_f32(inp + i), shift));
    vst1q_f32(out + i, e);
    vsum = vaddq_f32(vsum, e);
  }
  if (rest > 0) {
    // The padding lanes give e^(0 - max); they are zeroed before the sum and never stored.
    static const std::uint32_t kLanes[4] = {0, 1, 2, 3};
    const uint32x4_t keep = vcltq_u32(vld1q_u32(kLanes), vdupq_n_u32(static_cast<std::uint32_t>(rest)));
    const float32x4_t e = exp4(vsubq_f32(load_tail(inp + full, rest), shift));
    const float32x4_t kept = vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(e), keep));
    store_tail(out + full, kept, rest);
    vsum = vaddq_f32(vsum, kept);
  }
  const float32x4_t scale = vdupq_n_f32(1.0f / vaddvq_f32(vsum));
  for (long i = 0; i < full; i += 4) vst1q_f32(out + i, vmulq_f32(vld1q_f32(out + i), scale));
  if (rest > 0) store_tail(out + full, vmulq_f32(load_tail(out + full, rest), scale), rest);
}

void gelu_new(float* out, const float* inp, std::int64_t n) {
  const long full = n / 4 * 4;
  for (long i = 0; i < full; i += 4) vst1q_f32(out + i, gelu4(vld1q_f32(inp + i)));
  if (full < n) store_tail(out + full, gelu4(load_tail(inp + full, n - full)), n - full);
}

}  // namespace kael::kernels::neon
