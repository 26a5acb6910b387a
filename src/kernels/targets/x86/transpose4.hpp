// The 4x4 float transposition both x86 targets' traits use to pack GEMM inputs into tiles.
// SSE only (every x86-64 CPU has it); `static`, so each unit keeps its own copy.
#pragma once

#include <immintrin.h>

namespace kael::kernels::x86 {

// dst rows i = 0..3 (ld_dst apart) = column i of the 4x4 block at src (rows ld_src apart).
static inline void transpose4(float* dst, long ld_dst, const float* src, long ld_src) {
  __m128 r0 = _mm_loadu_ps(src), r1 = _mm_loadu_ps(src + ld_src);
  __m128 r2 = _mm_loadu_ps(src + 2 * ld_src), r3 = _mm_loadu_ps(src + 3 * ld_src);
  _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
  _mm_storeu_ps(dst, r0);
  _mm_storeu_ps(dst + ld_dst, r1);
  _mm_storeu_ps(dst + 2 * ld_dst, r2);
  _mm_storeu_ps(dst + 3 * ld_dst, r3);
}

}  // namespace kael::kernels::x86
