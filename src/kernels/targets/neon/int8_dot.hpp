// What the NEON int8 dot steps of family/int8.hpp share (int8.cpp: smull; int8_dotprod.cpp:
// SDOT): a 16-byte load of a k4 block is four columns' four weights each, multiplied by the
// row's four activations repeated in every lane. A base of each unit's step type (Step), so
// every instantiation carries that unit's own name.
#pragma once

#include <arm_neon.h>

#include <cstdint>

namespace kael::kernels::neon {

template <class Step>
struct DupActivations {
  using Sum = int32x4_t;
  static Sum zero() { return vdupq_n_s32(0); }
  static int8x16_t load(const std::int8_t* p) { return vld1q_s8(p); }
  static int8x16_t activations(std::int32_t four) { return vreinterpretq_s8_s32(vdupq_n_s32(four)); }
  static float32x4_t to_float(Sum sum) { return vcvtq_f32_s32(sum); }
};

}  // namespace kael::kernels::neon
