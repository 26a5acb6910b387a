// The int8 GEMM of int8.hpp (the KernelTable entry int8_gemm) for the targets whose byte dot
// product takes signed activations as they are (AVX2's pmaddubsw and AVX-VNNI with psignb,
// NEON's smull and SDOT), written once against the target's vector traits V and a dot step
// `Dot`, each unit of a target naming its own (so the instantiations never share a name):
//   Dot::Sum                   int32 lanes, one column's group sum in each;
//   Dot::zero()                a Sum of zeros;
//   Dot::load(p)               the k4 block bytes of kLanes columns at p (4 k x kLanes columns);
//   Dot::activations(four)     the row's 4 activation bytes (one int32) made ready for step;
//   Dot::step(sum, x, w)       sum + each column's dot of its 4 weights with the 4 activations;
//   Dot::to_float(sum)         the sums as floats (exact: |sum| < 2^24).
// Sums over a group are exact integers, so every dot step gives the same bits; the float steps
// (one FMA per group with the two scales, then the epilogue) run in the same order for every row
// count. (AVX512-VNNI's kernel, which offsets the activations instead, is avx512/int8.cpp.)
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/family/math.hpp"
#include "kernels/int8.hpp"

namespace kael::kernels::family {

// c (MR, 16) for the panel at w and its scales: one int32 sum per group and output, folded
// into the F32 accumulator as it completes. `valid`: columns of the panel that exist (the rest
// are padding and not stored).
template <class V, class Dot, int MR>
void int8_tile(float* c, long ldc, const std::int8_t* xq, const float* xs, long Kp, const std::int8_t* w,
               const std::uint16_t* scales, long valid, const float* bias, Epilogue epilogue) {
  using F = typename V::F;
  constexpr int L = V::kLanes, kVecs = 16 / L;
  constexpr long kBlocksPerGroup = kInt8Group / 4;  // 64-byte k4 blocks per panel and group
  const long groups = Kp / kInt8Group;
  F acc[MR][kVecs];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int i = 0; i < kVecs; ++i) acc[r][i] = V::zero();
  for (long g = 0; g < groups; ++g) {
    typename Dot::Sum dot[MR][kVecs];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
      for (int i = 0; i < kVecs; ++i) dot[r][i] = Dot::zero();
    const std::int8_t* wg = w + g * kBlocksPerGroup * 64;
#pragma GCC unroll 8
    for (long b = 0; b < kBlocksPerGroup; ++b) {
      decltype(Dot::load(wg)) wv[kVecs];
#pragma GCC unroll 8
      for (int i = 0; i < kVecs; ++i) wv[i] = Dot::load(wg + b * 64 + i * 4 * L);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        std::int32_t four;
        std::memcpy(&four, xq + r * Kp + g * kInt8Group + b * 4, sizeof four);
        const auto x = Dot::activations(four);
#pragma GCC unroll 8
        for (int i = 0; i < kVecs; ++i) dot[r][i] = Dot::step(dot[r][i], x, wv[i]);
      }
    }
    F scale[kVecs];
#pragma GCC unroll 8
    for (int i = 0; i < kVecs; ++i) scale[i] = V::load_bf16(scales + g * 16 + i * L);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const F xscale = V::set1(xs[r * groups + g]);
#pragma GCC unroll 8
      for (int i = 0; i < kVecs; ++i)
        acc[r][i] = V::fma(Dot::to_float(dot[r][i]), V::mul(xscale, scale[i]), acc[r][i]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int i = 0; i < kVecs; ++i) {
      const long col = L * i, count = valid - col;
      const float* b = bias ? bias + col : nullptr;
      if (count >= L)
        finish<V, false>(c + r * ldc + col, acc[r][i], b, epilogue, V::tail(L));
      else if (count > 0)
        finish<V, true>(c + r * ldc + col, acc[r][i], b, epilogue, V::tail(count));
    }
}

// The Int8GemmFn entry.
template <class V, class Dot>
void int8_gemm(float* c, std::int64_t ldc, const std::int8_t* xq, const float* xs, std::int64_t M,
               std::int64_t Kp, const std::int8_t* w, const std::uint16_t* scales, std::int64_t panels,
               std::int64_t n_valid, const float* bias, Epilogue epilogue) {
  const long groups = Kp / kInt8Group;
  // Rows in blocks whose activations stay in L2 while every panel passes over them.
  const long block = std::max<long>(1, (1 << 18) / Kp);
  for (long r0 = 0; r0 < M; r0 += block) {
    const long rows_left = std::min<long>(block, M - r0);
    const std::int8_t* xb = xq + r0 * Kp;
    const float* sb = xs + r0 * groups;
    float* cb = c + r0 * ldc;
    // Each panel stays in L1 while the row pairs pass over it. Decode (one row) streams one
    // panel at a time: two or four concurrent panel streams measured slower on AVX2
    // (docs/performance.md, "The measurements behind the code's constants").
    for (long p = 0; p < panels; ++p) {
      const std::int8_t* wp = w + p * 16 * Kp;
      const std::uint16_t* sp = scales + p * groups * 16;
      float* cp = cb + 16 * p;
      const float* bp = bias ? bias + 16 * p : nullptr;
      long r = 0;
      for (; r + 2 <= rows_left; r += 2)
        int8_tile<V, Dot, 2>(cp + r * ldc, ldc, xb + r * Kp, sb + r * groups, Kp, wp, sp, n_valid - 16 * p, bp,
                             epilogue);
      if (r < rows_left)
        int8_tile<V, Dot, 1>(cp + r * ldc, ldc, xb + r * Kp, sb + r * groups, Kp, wp, sp, n_valid - 16 * p, bp,
                             epilogue);
    }
  }
}

}  // namespace kael::kernels::family
