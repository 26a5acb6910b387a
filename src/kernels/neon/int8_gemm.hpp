// The int8 GEMM of int8.hpp for NEON, as templates over the byte dot product: included by
// int8.cpp (widening multiplies, any ARMv8-A CPU) and int8_dotprod.cpp (SDOT, compiled for
// ARMv8.2-A+dotprod). Internal linkage, so neither unit's code can stand in for the other's.
//
// A 16-byte load of a k4 block is four columns' four weights each: exactly SDOT's operand
// order (lane j += the dot of bytes 4j..4j+3 of both operands), with the row's four
// activations repeated in every lane. Without SDOT the same sums come from smull (int8 x int8
// -> int16, 8 products), addp (adjacent pairs: |sum| <= 2 * 127 * 127, inside int16) and
// sadalp (pairs again, into int32). Sums over a group are exact integers, so both give the
// same bits; the float steps (one FMA per group, then the epilogue) run in the same order for
// every row count.
#pragma once

#include <arm_neon.h>

#include <algorithm>
#include <cstring>

#include "kernels/int8.hpp"
#include "kernels/neon/kernels.hpp"
#include "kernels/neon/math.hpp"

namespace kael::kernels::neon {
namespace {

constexpr long kGroup = kInt8Group;
constexpr long kBlocksPerGroup = kGroup / 4;  // 64-byte k4 blocks per panel and group

// 4 BF16 scales as F32.
inline float32x4_t bf16x4(const std::uint16_t* s) { return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(s), 16)); }

// acc (4 int32, one per column) += the dot of 4 activations (x: the same 4 bytes in every
// lane) with each column's 4 weights in w.
template <bool SDOT>
inline int32x4_t dot4(int32x4_t acc, int8x16_t x, int8x16_t w) {
  if constexpr (SDOT) {
    return vdotq_s32(acc, w, x);
  } else {
    const int16x8_t lo = vmull_s8(vget_low_s8(w), vget_low_s8(x)), hi = vmull_high_s8(w, x);
    return vpadalq_s16(acc, vpaddq_s16(lo, hi));
  }
}

// c (MR, 16) for the panel at w and its scales: one int32 sum per group and output, folded
// into the F32 accumulator as it completes. `valid`: columns of the panel that exist (the rest
// are padding and not stored).
template <bool SDOT, int MR>
void tile(float* c, long ldc, const std::int8_t* xq, const float* xs, long Kp, const std::int8_t* w,
          const std::uint16_t* scales, long valid, const float* bias, Epilogue epilogue) {
  constexpr int kVecs = 4;  // 4 columns each
  const long groups = Kp / kGroup;
  float32x4_t acc[MR][kVecs];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int i = 0; i < kVecs; ++i) acc[r][i] = vdupq_n_f32(0.0f);
  for (long g = 0; g < groups; ++g) {
    int32x4_t dot[MR][kVecs];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
      for (int i = 0; i < kVecs; ++i) dot[r][i] = vdupq_n_s32(0);
    const std::int8_t* wg = w + g * kBlocksPerGroup * 64;
#pragma GCC unroll 8
    for (long b = 0; b < kBlocksPerGroup; ++b) {
      int8x16_t wv[kVecs];
#pragma GCC unroll 8
      for (int i = 0; i < kVecs; ++i) wv[i] = vld1q_s8(wg + b * 64 + i * 16);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        std::int32_t four;
        std::memcpy(&four, xq + r * Kp + g * kGroup + b * 4, sizeof four);
        const int8x16_t x = vreinterpretq_s8_s32(vdupq_n_s32(four));
#pragma GCC unroll 8
        for (int i = 0; i < kVecs; ++i) dot[r][i] = dot4<SDOT>(dot[r][i], x, wv[i]);
      }
    }
    float32x4_t scale[kVecs];
#pragma GCC unroll 8
    for (int i = 0; i < kVecs; ++i) scale[i] = bf16x4(scales + g * 16 + i * 4);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const float32x4_t xscale = vdupq_n_f32(xs[r * groups + g]);
#pragma GCC unroll 8
      for (int i = 0; i < kVecs; ++i)
        acc[r][i] = vfmaq_f32(acc[r][i], vcvtq_f32_s32(dot[r][i]), vmulq_f32(xscale, scale[i]));
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int i = 0; i < kVecs; ++i) {
      const long col = 4 * i, count = std::min<long>(4, valid - col);
      if (count > 0) finish(c + r * ldc + col, acc[r][i], bias ? bias + col : nullptr, epilogue, count);
    }
}

// int8_gemm of int8.hpp, with either dot product.
template <bool SDOT>
void gemm(float* c, long ldc, const std::int8_t* xq, const float* xs, long M, long Kp, const std::int8_t* w,
          const std::uint16_t* scales, long panels, long n_valid, const float* bias, Epilogue epilogue) {
  const long groups = Kp / kGroup;
  // Rows in blocks whose activations stay in L2 while every panel passes over them; each
  // panel stays in L1 while the row pairs pass over it.
  const long block = std::max<long>(1, (1 << 18) / Kp);
  for (long r0 = 0; r0 < M; r0 += block) {
    const long rows_left = std::min<long>(block, M - r0);
    const std::int8_t* xb = xq + r0 * Kp;
    const float* sb = xs + r0 * groups;
    float* cb = c + r0 * ldc;
    for (long p = 0; p < panels; ++p) {
      const std::int8_t* wp = w + p * 16 * Kp;
      const std::uint16_t* sp = scales + p * groups * 16;
      float* cp = cb + 16 * p;
      const float* bp = bias ? bias + 16 * p : nullptr;
      long r = 0;
      for (; r + 2 <= rows_left; r += 2)
        tile<SDOT, 2>(cp + r * ldc, ldc, xb + r * Kp, sb + r * groups, Kp, wp, sp, n_valid - 16 * p, bp, epilogue);
      if (r < rows_left)
        tile<SDOT, 1>(cp + r * ldc, ldc, xb + r * Kp, sb + r * groups, Kp, wp, sp, n_valid - 16 * p, bp, epilogue);
    }
  }
}

}  // namespace
}  // namespace kael::kernels::neon
