// F32 to BF16 for the AVX-512 BF16 units (only kernels/targets/avx512/*_bf16.cpp include this: it needs
// -mavx512bf16): core's f32_to_bf16 lane by lane, the one rounding every BF16 operand takes,
// whether an activation of the inference GEMV or an operand of the training product. Its
// functions are `static` so no other unit can link them.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace kael::kernels::avx512 {

// Per 32-bit lane, the BF16 of the F32 in it, in the low 16 bits (the high 16 zero): core's
// f32_to_bf16 lane by lane (round to nearest even on the bits, so subnormals are kept, unlike
// vcvtneps2bf16; a NaN keeps its top bits and becomes quiet).
static inline __m512i bf16_lanes(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i high = _mm512_srli_epi32(bits, 16);
  const __m512i lsb = _mm512_and_si512(high, _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), lsb)), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFFFF)),
                                                _mm512_set1_epi32(0x7F800000));
  return _mm512_mask_mov_epi32(rounded, nan, _mm512_or_si512(high, _mm512_set1_epi32(0x40)));
}

// Lanes of v that hold an F32 subnormal (exponent field zero, mantissa not). vcvtneps2bf16
// rounds every other value as bf16_lanes does (to nearest even whatever MXCSR says, a NaN kept
// quiet with its top bits), but reads these as zero where core rounds them (the largest become
// BF16's smallest normal), so a vector holding one takes bf16_lanes.
static inline __mmask16 subnormal_lanes(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  return _mm512_mask_test_epi32_mask(_mm512_testn_epi32_mask(bits, _mm512_set1_epi32(0x7F800000)), bits,
                                     _mm512_set1_epi32(0x007FFFFF));
}

// 16 BF16 (one per lane of v, rounded as above) stored at dst.
static inline void store_bf16(std::uint16_t* dst, __m512 v) {
  if (subnormal_lanes(v) == 0) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), (__m256i)_mm512_cvtneps_pbh(v));
    return;
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm512_cvtepi32_epi16(bf16_lanes(v)));
}

// The 32 BF16 of lo then hi (16 lanes each) as one vector.
static inline __m512i bf16_row(__m512 lo, __m512 hi) {
  if ((subnormal_lanes(lo) | subnormal_lanes(hi)) == 0) return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
  return _mm512_inserti64x4(_mm512_zextsi256_si512(_mm512_cvtepi32_epi16(bf16_lanes(lo))),
                            _mm512_cvtepi32_epi16(bf16_lanes(hi)), 1);
}

}  // namespace kael::kernels::avx512
