// Vector exp, GELU, horizontal sums, ragged loads and the output epilogue (bias, GELU,
// residual, store) shared by the F32, F16 and int8 NEON kernels: the same formulas as the x86
// sets' math.hpp, four lanes at a time. Only neon/*.cpp include this; its functions are
// `static`, so a unit built with extra flags (int8_dotprod.cpp) never lends its copy.
#pragma once

#include <arm_neon.h>

#include <cstring>

#include "kernels/gemm.hpp"

namespace kael::kernels::neon {

// e^x, Cephes' expf: x = n ln2 + r with |r| <= ln2 / 2, a degree-6 polynomial for e^r, and 2^n
// put into the exponent bits; about 2 ulp. x is clamped to [-87.3, 88.3], where both e^x and
// 2^n stay normal floats; below -87.3 the result is 0 (softmax relies on e^-inf = 0).
static inline float32x4_t exp4(float32x4_t x) {
  const uint32x4_t underflow = vcltq_f32(x, vdupq_n_f32(-87.3f));
  x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-87.3f)), vdupq_n_f32(88.3f));
  const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
  // ln2 in two parts, so n * ln2_hi is exact and r keeps its low bits.
  float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
  r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
  p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
  p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
  p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
  const int32x4_t exponent = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
  const float32x4_t e = vmulq_f32(p, vreinterpretq_f32_s32(exponent));
  return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(e), underflow));
}

// gelu_new(x) = 0.5 x (1 + tanh(u)) = x / (1 + e^(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3):
// one exp, one division, and no cancellation near u = 0.
static inline float32x4_t gelu4(float32x4_t x) {
  const float32x4_t x3 = vmulq_f32(vmulq_f32(x, x), x);
  const float32x4_t u = vmulq_f32(vdupq_n_f32(0.7978845608028654f), vfmaq_f32(x, vdupq_n_f32(0.044715f), x3));
  const float32x4_t e = exp4(vmulq_f32(vdupq_n_f32(-2.0f), u));
  return vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0f), e));
}

// The first `count` (0..4) floats at p, zeros after: NEON has no masked loads, and a ragged
// tail may end at the end of its buffer.
static inline float32x4_t load_tail(const float* p, long count) {
  float lanes[4] = {};
  std::memcpy(lanes, p, static_cast<std::size_t>(count) * sizeof(float));
  return vld1q_f32(lanes);
}

static inline void store_tail(float* p, float32x4_t v, long count) {
  float lanes[4];
  vst1q_f32(lanes, v);
  std::memcpy(p, lanes, static_cast<std::size_t>(count) * sizeof(float));
}

// Stores one 4-wide group of outputs after the epilogue; count < 4 for a ragged group.
static inline void finish(float* c, float32x4_t y, const float* bias, Epilogue epilogue, long count = 4) {
  const bool full = count >= 4;
  if (bias != nullptr) y = vaddq_f32(y, full ? vld1q_f32(bias) : load_tail(bias, count));
  if (epilogue == Epilogue::gelu) y = gelu4(y);
  if (epilogue == Epilogue::residual) y = vaddq_f32(full ? vld1q_f32(c) : load_tail(c, count), y);
  if (full)
    vst1q_f32(c, y);
  else
    store_tail(c, y, count);
}

}  // namespace kael::kernels::neon
