// What the AVX2 int8 dot steps of family/int8.hpp share (int8.cpp: pmaddubsw; int8_vnni.cpp:
// AVX-VNNI's vpdpbusd). Both multiply unsigned by signed bytes, and activations are signed, so
// each step uses |x| as the unsigned operand and moves x's sign onto the weight (psignb):
// |x| * (w * sign x) = x * w. A base of each unit's step type (Step), so every instantiation
// carries that unit's own name.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace kael::kernels::avx2 {

template <class Step>
struct SignedBytes {
  using Sum = __m256i;
  struct Activations {
    __m256i x, xabs;  // 4 bytes in every lane, and their absolute values
  };
  static Sum zero() { return _mm256_setzero_si256(); }
  static __m256i load(const std::int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static Activations activations(std::int32_t four) {
    const __m256i x = _mm256_set1_epi32(four);
    return {x, _mm256_abs_epi8(x)};
  }
  static __m256 to_float(Sum sum) { return _mm256_cvtepi32_ps(sum); }
};

}  // namespace kael::kernels::avx2
