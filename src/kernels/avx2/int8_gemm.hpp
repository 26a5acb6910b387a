// The int8 GEMM of int8.hpp for AVX2, as templates over the byte dot instruction: included by
// avx2/int8.cpp (pmaddubsw, any AVX2 CPU) and avx2/int8_vnni.cpp (vpdpbusd, compiled for
// AVX-VNNI). Internal linkage, so neither unit's code can stand in for the other's.
//
// The byte dot product is pmaddubsw, which multiplies unsigned by signed bytes. Activations are
// signed, so each step uses |x| as the unsigned operand and moves x's sign onto the weight
// (psignb): |x| * (w * sign x) = x * w. With |x|, |w| <= 127 a pair sums to at most
// 2 * 127 * 127 = 32258, inside int16, so pmaddubsw never saturates; pmaddwd by 1 widens the
// pairs to int32. Four instructions per 32 multiply-adds (two with VNNI) keep a core ahead of
// the memory that streams the weights. Sums over a group are exact integers, so every blocking below gives
// the same bits; the float steps (one FMA per group, then the epilogue) run in the same order
// for every row count.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/avx2/math.hpp"
#include "kernels/avx2/kernels.hpp"
#include "kernels/int8.hpp"

namespace kael::kernels::avx2 {
namespace {

constexpr long kGroup = kInt8Group;
constexpr long kBlocksPerGroup = kGroup / 4;  // 64-byte k4 blocks per panel and group

// 8 BF16 scales as F32.
inline __m256 bf16x8(const std::uint16_t* s) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}

// acc (8 int32, one per column) += the dot of 4 activations (x: 4 bytes in every lane, xabs
// their absolute values) with each column's 4 weights in w. VNNI's vpdpbusd does in one
// instruction what pmaddubsw, pmaddwd and paddd do in three, with the same exact result.
template <bool VNNI>
inline __m256i dot4(__m256i acc, __m256i x, __m256i xabs, __m256i w) {
  const __m256i signed_w = _mm256_sign_epi8(w, x);
  if constexpr (VNNI) {
    return _mm256_dpbusd_avx_epi32(acc, xabs, signed_w);
  } else {
    const __m256i pairs = _mm256_maddubs_epi16(xabs, signed_w);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
}

// c (MR, 16) for the panel at w and its scales: one int32 sum per group and output, folded
// into the F32 accumulator as it completes. `valid`: columns of the panel that exist (the rest
// are padding and not stored).
template <bool VNNI, int MR>
void tile(float* c, long ldc, const std::int8_t* xq, const float* xs, long Kp, const std::int8_t* w,
          const std::uint16_t* scales, long valid, const float* bias, Epilogue epilogue) {
  constexpr int kVecs = 2;  // 8 columns each
  const long groups = Kp / kGroup;
  __m256 acc[MR][kVecs];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int i = 0; i < kVecs; ++i) acc[r][i] = _mm256_setzero_ps();
  for (long g = 0; g < groups; ++g) {
    __m256i dot[MR][kVecs];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
      for (int i = 0; i < kVecs; ++i) dot[r][i] = _mm256_setzero_si256();
    const std::int8_t* wg = w + g * kBlocksPerGroup * 64;
#pragma GCC unroll 8
    for (long b = 0; b < kBlocksPerGroup; ++b) {
      __m256i wv[kVecs];
#pragma GCC unroll 8
      for (int i = 0; i < kVecs; ++i)
        wv[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wg + b * 64 + i * 32));
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        std::int32_t four;
        std::memcpy(&four, xq + r * Kp + g * kGroup + b * 4, sizeof four);
        const __m256i x = _mm256_set1_epi32(four), xabs = _mm256_abs_epi8(x);
#pragma GCC unroll 8
        for (int i = 0; i < kVecs; ++i) dot[r][i] = dot4<VNNI>(dot[r][i], x, xabs, wv[i]);
      }
    }
    __m256 scale[kVecs];
#pragma GCC unroll 8
    for (int i = 0; i < kVecs; ++i) scale[i] = bf16x8(scales + g * 16 + i * 8);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m256 xscale = _mm256_set1_ps(xs[r * groups + g]);
#pragma GCC unroll 8
      for (int i = 0; i < kVecs; ++i)
        acc[r][i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[r][i]), _mm256_mul_ps(xscale, scale[i]), acc[r][i]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int i = 0; i < kVecs; ++i) {
      const long col = 8 * i, count = valid - col;
      const float* b = bias ? bias + col : nullptr;
      if (count >= 8)
        finish<false>(c + r * ldc + col, acc[r][i], b, epilogue, _mm256_setzero_si256());
      else if (count > 0)
        finish<true>(c + r * ldc + col, acc[r][i], b, epilogue, tail_mask(count));
    }
}

// int8_gemm of int8.hpp, with either dot instruction.
template <bool VNNI>
void gemm(float* c, long ldc, const std::int8_t* xq, const float* xs, long M, long Kp, const std::int8_t* w,
          const std::uint16_t* scales, long panels, long n_valid, const float* bias, Epilogue epilogue) {
  const long groups = Kp / kGroup;
  // Rows in blocks whose activations stay in L2 while every panel passes over them.
  const long block = std::max<long>(1, (1 << 18) / Kp);
  for (long r0 = 0; r0 < M; r0 += block) {
    const long rows_left = std::min<long>(block, M - r0);
    const std::int8_t* xb = xq + r0 * Kp;
    const float* sb = xs + r0 * groups;
    float* cb = c + r0 * ldc;
    // Each panel stays in L1 while the row pairs pass over it. Decode (one row) streams one
    // panel at a time: two or four concurrent panel streams measured slower
    // (docs/performance.md, "The measurements behind the code's constants").
    for (long p = 0; p < panels; ++p) {
      const std::int8_t* wp = w + p * 16 * Kp;
      const std::uint16_t* sp = scales + p * groups * 16;
      float* cp = cb + 16 * p;
      const float* bp = bias ? bias + 16 * p : nullptr;
      long r = 0;
      for (; r + 2 <= rows_left; r += 2)
        tile<VNNI, 2>(cp + r * ldc, ldc, xb + r * Kp, sb + r * groups, Kp, wp, sp, n_valid - 16 * p, bp, epilogue);
      if (r < rows_left)
        tile<VNNI, 1>(cp + r * ldc, ldc, xb + r * Kp, sb + r * groups, Kp, wp, sp, n_valid - 16 * p, bp, epilogue);
    }
  }
}

}  // namespace
}  // namespace kael::kernels::avx2

