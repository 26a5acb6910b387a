// The AVX-512 target's vector traits (as avx2/vec.hpp's, on zmm registers and mask registers).
// Only avx512/*.cpp include this; every family template instantiated with it carries
// `avx512::Vec` in its name.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/targets/x86/transpose4.hpp"

namespace kael::kernels::avx512 {

struct Vec {
  using F = __m512;
  using I = __m512i;
  using D = __m512d;
  using Cmp = __mmask16;
  using Tail = __mmask16;
  static constexpr int kLanes = 16;
  static constexpr int kDoubleLanes = 8;
  static constexpr int kRegisters = 32;
  // The F32 GEMM's prefill tile: 12 rows x 2 panels, 24 accumulators + 2 panel rows.
  static constexpr int kTileRows = 12;
  static constexpr int kTilePanels = 2;
  // The F16 prefill tile: 16 rows x 1 panel, each converted panel row serving 16 rows (8 in
  // the 8 x 2 tiles of 16 rows: 0.9 of F32's rate).
  static constexpr int kF16TileRows = 16;
  static constexpr int kF16TilePanels = 1;
  // Cache blocking of the F32 GEMM's prefill (family/gemm.hpp): k-blocks, packed tiles and
  // prefetched panel groups (docs/performance.md, "The F32 prefill: changes and what bounds it").
  static constexpr bool kBlockForCaches = true;
  // F16 decode with two rows: 4 panels (8 accumulators).
  static constexpr int kF16TwoRowPanels = 4;
  static constexpr int kNtRows = 3;

  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float x) { return _mm512_set1_ps(x); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static F load_bf16(const std::uint16_t* p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
  }
  static F load_f16(const std::uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static Tail tail(long n) {  // n in 0..16
    return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1u);
  }
  static F load(const float* p, Tail t) { return _mm512_maskz_loadu_ps(t, p); }
  static void store(float* p, F v, Tail t) { _mm512_mask_storeu_ps(p, t, v); }
  static F keep(Tail t, F v) { return _mm512_maskz_mov_ps(t, v); }

  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F div(F a, F b) { return _mm512_div_ps(a, b); }
  static F sqrt(F a) { return _mm512_sqrt_ps(a); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }  // b when either is NaN
  static F min(F a, F b) { return _mm512_min_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F fnma(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }
  static F round(F x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static Cmp less(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static F zero_where(Cmp m, F v) { return _mm512_maskz_mov_ps(static_cast<__mmask16>(~m), v); }
  static F select(Cmp m, F if_true, F if_false) { return _mm512_mask_blend_ps(m, if_false, if_true); }
  static I sign_bit() { return _mm512_set1_epi32(static_cast<int>(0x80000000u)); }
  static F negate(F x) { return from_bits(_mm512_xor_si512(bits(x), sign_bit())); }
  static F abs(F x) { return from_bits(_mm512_andnot_si512(sign_bit(), bits(x))); }
  static F copy_sign(F magnitude, F from) {
    return from_bits(_mm512_or_si512(bits(magnitude), _mm512_and_si512(bits(from), sign_bit())));
  }

  static I to_int(F integral) { return _mm512_cvtps_epi32(integral); }
  static I bits(F x) { return _mm512_castps_si512(x); }
  static F from_bits(I x) { return _mm512_castsi512_ps(x); }
  static I iset1(int x) { return _mm512_set1_epi32(x); }
  static I iadd(I a, I b) { return _mm512_add_epi32(a, b); }
  static I isub(I a, I b) { return _mm512_sub_epi32(a, b); }
  template <int n>
  static I shl(I x) { return _mm512_slli_epi32(x, n); }
  template <int n>
  static I sra(I x) { return _mm512_srai_epi32(x, n); }

  static float hsum(F v) { return _mm512_reduce_add_ps(v); }
  static float hmax(F v) { return _mm512_reduce_max_ps(v); }

  static D zero_d() { return _mm512_setzero_pd(); }
  static D add_d(D a, D b) { return _mm512_add_pd(a, b); }
  static D mul_d(D a, D b) { return _mm512_mul_pd(a, b); }
  static D widen_low(F v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
  static D widen_high(F v) {
    return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  }
  static void store_d(double* p, D v) { _mm512_storeu_pd(p, v); }

  static void prefetch(const float* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0); }
  static void prefetch_l2(const float* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1); }
  static void transpose4(float* dst, long ld_dst, const float* src, long ld_src) {
    x86::transpose4(dst, ld_dst, src, ld_src);
  }
  // dst rows c = 0..15 (ld_dst apart) = column c of the 16x16 block at src (rows ld_src apart), in
  // registers: 16 loads, 64 shuffles, 16 stores where 16 transpose4 calls make 64 of each
  // (family/gemv.hpp's transposition of the weight). u[4g + j] holds, in 128-bit lane l,
  // column 4l + j of rows 4g..4g+3; the two lane shuffles gather each column's four groups.
  static void transpose16(float* dst, long ld_dst, const float* src, long ld_src) {
    __m512 r[16], t[16];
    for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * ld_src);
    for (int g = 0; g < 4; ++g) {
      t[4 * g + 0] = _mm512_unpacklo_ps(r[4 * g], r[4 * g + 1]);
      t[4 * g + 1] = _mm512_unpackhi_ps(r[4 * g], r[4 * g + 1]);
      t[4 * g + 2] = _mm512_unpacklo_ps(r[4 * g + 2], r[4 * g + 3]);
      t[4 * g + 3] = _mm512_unpackhi_ps(r[4 * g + 2], r[4 * g + 3]);
      r[4 * g + 0] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(1, 0, 1, 0));
      r[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(3, 2, 3, 2));
      r[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(1, 0, 1, 0));
      r[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int j = 0; j < 4; ++j) {
      t[j] = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88);       // columns j, 8 + j of rows 0-7
      t[4 + j] = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xdd);   // columns 4 + j, 12 + j
      t[8 + j] = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);  // the same of rows 8-15
      t[12 + j] = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xdd);
    }
    for (int j = 0; j < 4; ++j) {
      _mm512_storeu_ps(dst + j * ld_dst, _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88));
      _mm512_storeu_ps(dst + (8 + j) * ld_dst, _mm512_shuffle_f32x4(t[j], t[8 + j], 0xdd));
      _mm512_storeu_ps(dst + (4 + j) * ld_dst, _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0x88));
      _mm512_storeu_ps(dst + (12 + j) * ld_dst, _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0xdd));
    }
  }
};

}  // namespace kael::kernels::avx512
