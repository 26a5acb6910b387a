// The AVX2 target's vector traits: what the kernel families (kernels/family/) need of a vector
// unit, on ymm registers. Only avx2/*.cpp include this (compiled with -mavx2 -mfma -mf16c);
// every family template is instantiated with this type, so each instantiation's name carries
// `avx2::Vec` and the linker can never hand it to another target's caller.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/targets/x86/transpose4.hpp"

namespace kael::kernels::avx2 {

struct Vec {
  using F = __m256;      // 8 floats
  using I = __m256i;     // 8 int32
  using D = __m256d;     // 4 doubles
  using Cmp = __m256;    // a lane comparison's result
  using Tail = __m256i;  // lanes [0, n), for the ragged end of a row
  static constexpr int kLanes = 8;
  static constexpr int kDoubleLanes = 4;
  static constexpr int kRegisters = 16;
  // The F32 GEMM's prefill tile: 6 rows x 1 panel, 12 accumulators + 2 panel halves + 1 input.
  static constexpr int kTileRows = 6;
  static constexpr int kTilePanels = 1;
  // The F16 tile: F32's.
  static constexpr int kF16TileRows = kTileRows;
  static constexpr int kF16TilePanels = kTilePanels;
  // gemm_nt's rows per pass: 3 x 4 accumulators + 4 b rows + 1 a row.
  // Cache blocking of the F32 GEMM (family/gemm.hpp): off, measured slower with this
  // 6-row tile at 16 rows (docs/performance.md, "Kernel families").
  static constexpr bool kBlockForCaches = false;
  // F16 decode with two rows: 4 panels (16 accumulators), measured faster than 2 (0.88x).
  static constexpr int kF16TwoRowPanels = 4;
  static constexpr int kNtRows = 3;

  static F zero() { return _mm256_setzero_ps(); }
  static F set1(float x) { return _mm256_set1_ps(x); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static F load_bf16(const std::uint16_t* p) {  // kLanes BF16 values as F32 (exact)
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
  }
  static F load_f16(const std::uint16_t* p) {  // kLanes halves, converted exactly (F16C)
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static Tail tail(long n) {  // n in 0..8
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static F load(const float* p, Tail t) { return _mm256_maskload_ps(p, t); }  // lanes past t: 0
  static void store(float* p, F v, Tail t) { _mm256_maskstore_ps(p, t, v); }
  static F keep(Tail t, F v) { return _mm256_and_ps(v, _mm256_castsi256_ps(t)); }  // 0 past t

  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F div(F a, F b) { return _mm256_div_ps(a, b); }
  static F sqrt(F a) { return _mm256_sqrt_ps(a); }
  // max/min return b when either is NaN.
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static F min(F a, F b) { return _mm256_min_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }    // a b + c, rounded once
  static F fnma(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }  // c - a b, rounded once
  static F round(F x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static Cmp less(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static F zero_where(Cmp m, F v) { return _mm256_andnot_ps(m, v); }
  static F select(Cmp m, F if_true, F if_false) { return _mm256_blendv_ps(if_false, if_true, m); }
  static F sign_bit() { return _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u))); }
  static F negate(F x) { return _mm256_xor_ps(x, sign_bit()); }
  static F abs(F x) { return _mm256_andnot_ps(sign_bit(), x); }
  static F copy_sign(F magnitude, F from) { return _mm256_or_ps(magnitude, _mm256_and_ps(from, sign_bit())); }

  static I to_int(F integral) { return _mm256_cvtps_epi32(integral); }
  static I bits(F x) { return _mm256_castps_si256(x); }
  static F from_bits(I x) { return _mm256_castsi256_ps(x); }
  static I iset1(int x) { return _mm256_set1_epi32(x); }
  static I iadd(I a, I b) { return _mm256_add_epi32(a, b); }
  static I isub(I a, I b) { return _mm256_sub_epi32(a, b); }
  template <int n>
  static I shl(I x) { return _mm256_slli_epi32(x, n); }
  template <int n>
  static I sra(I x) { return _mm256_srai_epi32(x, n); }

  static float hsum(F v) {  // in a fixed order
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
  }
  static float hmax(F v) {
    const __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 t = _mm_max_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_max_ss(t, _mm_movehdup_ps(t)));
  }

  static D zero_d() { return _mm256_setzero_pd(); }
  static D add_d(D a, D b) { return _mm256_add_pd(a, b); }
  static D mul_d(D a, D b) { return _mm256_mul_pd(a, b); }
  static D widen_low(F v) { return _mm256_cvtps_pd(_mm256_castps256_ps128(v)); }
  static D widen_high(F v) { return _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)); }
  static void store_d(double* p, D v) { _mm256_storeu_pd(p, v); }

  static void prefetch(const float* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0); }
  static void prefetch_l2(const float* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1); }
  static void transpose4(float* dst, long ld_dst, const float* src, long ld_src) {
    x86::transpose4(dst, ld_dst, src, ld_src);
  }
};

}  // namespace kael::kernels::avx2
