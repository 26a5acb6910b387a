// The NEON target's vector traits (as avx2/vec.hpp's, on 128-bit q registers). NEON has no
// masked loads: a ragged end goes through a zero-padded copy (a row may end at the end of its
// buffer). Only neon/*.cpp include this; every family template instantiated with it carries
// `neon::Vec` in its name.
#pragma once

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

namespace kael::kernels::neon {

struct Vec {
  using F = float32x4_t;
  using I = int32x4_t;
  using D = float64x2_t;
  using Cmp = uint32x4_t;
  using Tail = long;  // the count of lanes, 0..4
  static constexpr int kLanes = 4;
  static constexpr int kDoubleLanes = 2;
  static constexpr int kRegisters = 32;
  // The F32 GEMM's prefill tile: 6 rows x 1 panel, 24 accumulators + 4 panel quarters.
  static constexpr int kTileRows = 6;
  static constexpr int kTilePanels = 1;
  // The F16 tile: F32's.
  static constexpr int kF16TileRows = kTileRows;
  static constexpr int kF16TilePanels = kTilePanels;
  // gemm_nt's rows per pass: 4 x 4 accumulators + 4 b rows + 1 a row.
  // Cache blocking of the F32 GEMM (family/gemm.hpp): off, as before the families (no
  // ARM64 machine to measure it on; qemu gives correctness, not speed).
  static constexpr bool kBlockForCaches = false;
  // F16 decode with two rows: 2 panels (16 accumulators; 4 would take all 32 registers).
  static constexpr int kF16TwoRowPanels = 2;
  static constexpr int kNtRows = 4;

  static F zero() { return vdupq_n_f32(0.0f); }
  static F set1(float x) { return vdupq_n_f32(x); }
  static F load(const float* p) { return vld1q_f32(p); }
  static F load_bf16(const std::uint16_t* p) { return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16)); }
  static F load_f16(const std::uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }  // FCVTL: exact
  static void store(float* p, F v) { vst1q_f32(p, v); }
  static Tail tail(long n) { return n; }
  static F load(const float* p, Tail n) {
    if (n >= 4) return vld1q_f32(p);
    float lanes[4] = {};
    std::memcpy(lanes, p, static_cast<std::size_t>(n) * sizeof(float));
    return vld1q_f32(lanes);
  }
  static void store(float* p, F v, Tail n) {
    if (n >= 4) return vst1q_f32(p, v);
    float lanes[4];
    vst1q_f32(lanes, v);
    std::memcpy(p, lanes, static_cast<std::size_t>(n) * sizeof(float));
  }
  static F keep(Tail n, F v) {
    static const std::uint32_t kIndex[4] = {0, 1, 2, 3};
    const uint32x4_t kept = vcltq_u32(vld1q_u32(kIndex), vdupq_n_u32(static_cast<std::uint32_t>(n)));
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(v), kept));
  }

  static F add(F a, F b) { return vaddq_f32(a, b); }
  static F sub(F a, F b) { return vsubq_f32(a, b); }
  static F mul(F a, F b) { return vmulq_f32(a, b); }
  static F div(F a, F b) { return vdivq_f32(a, b); }
  static F sqrt(F a) { return vsqrtq_f32(a); }
  static F max(F a, F b) { return vmaxq_f32(a, b); }  // NaN when either is NaN
  static F min(F a, F b) { return vminq_f32(a, b); }
  static F fma(F a, F b, F c) { return vfmaq_f32(c, a, b); }
  static F fnma(F a, F b, F c) { return vfmsq_f32(c, a, b); }
  static F round(F x) { return vrndnq_f32(x); }
  static Cmp less(F a, F b) { return vcltq_f32(a, b); }
  static F zero_where(Cmp m, F v) { return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(v), m)); }
  static F select(Cmp m, F if_true, F if_false) { return vbslq_f32(m, if_true, if_false); }
  static F negate(F x) { return vnegq_f32(x); }
  static F abs(F x) { return vabsq_f32(x); }
  static F copy_sign(F magnitude, F from) {
    const uint32x4_t sign = vandq_u32(vreinterpretq_u32_f32(from), vdupq_n_u32(0x80000000u));
    return vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(magnitude), sign));
  }

  static I to_int(F integral) { return vcvtq_s32_f32(integral); }  // exact: the lanes are integers
  static I bits(F x) { return vreinterpretq_s32_f32(x); }
  static F from_bits(I x) { return vreinterpretq_f32_s32(x); }
  static I iset1(int x) { return vdupq_n_s32(x); }
  static I iadd(I a, I b) { return vaddq_s32(a, b); }
  static I isub(I a, I b) { return vsubq_s32(a, b); }
  template <int n>
  static I shl(I x) { return vshlq_n_s32(x, n); }
  template <int n>
  static I sra(I x) { return vshrq_n_s32(x, n); }

  static float hsum(F v) { return vaddvq_f32(v); }
  static float hmax(F v) { return vmaxvq_f32(v); }

  static D zero_d() { return vdupq_n_f64(0.0); }
  static D add_d(D a, D b) { return vaddq_f64(a, b); }
  static D mul_d(D a, D b) { return vmulq_f64(a, b); }
  static D widen_low(F v) { return vcvt_f64_f32(vget_low_f32(v)); }
  static D widen_high(F v) { return vcvt_high_f64_f32(v); }
  static void store_d(double* p, D v) { vst1q_f64(p, v); }

  static void prefetch(const float* p) { __builtin_prefetch(p); }
  static void prefetch_l2(const float* p) { __builtin_prefetch(p, 0, 2); }
  static void transpose4(float* dst, long ld_dst, const float* src, long ld_src) {
    const float32x4x2_t ab = vtrnq_f32(vld1q_f32(src), vld1q_f32(src + ld_src));  // a0 b0 a2 b2 | a1 b1 a3 b3
    const float32x4x2_t cd = vtrnq_f32(vld1q_f32(src + 2 * ld_src), vld1q_f32(src + 3 * ld_src));
    vst1q_f32(dst, vcombine_f32(vget_low_f32(ab.val[0]), vget_low_f32(cd.val[0])));
    vst1q_f32(dst + ld_dst, vcombine_f32(vget_low_f32(ab.val[1]), vget_low_f32(cd.val[1])));
    vst1q_f32(dst + 2 * ld_dst, vcombine_f32(vget_high_f32(ab.val[0]), vget_high_f32(cd.val[0])));
    vst1q_f32(dst + 3 * ld_dst, vcombine_f32(vget_high_f32(ab.val[1]), vget_high_f32(cd.val[1])));
  }
};

}  // namespace kael::kernels::neon
