// The sum a memory-read bandwidth probe streams through: 4 independent 256-bit sums where the
// CPU has AVX2 (so the loads, not the adds, bound it), 8 plain ones elsewhere. Shared by
// bench/bandwidth.cpp and bench/tensor_speed.cpp. Header-only: each bench is one .cpp file.
#pragma once

#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kael::bench {

inline float read_plain(const float* p, std::int64_t n) {
  float s[8] = {};
  for (std::int64_t i = 0; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) s[j] += p[i + j];
  float total = 0;
  for (const float x : s) total += x;
  return total;
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) inline float read_avx2(const float* p, std::int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (std::int64_t i = 0; i + 32 <= n; i += 32) {
    s0 = _mm256_add_ps(s0, _mm256_loadu_ps(p + i));
    s1 = _mm256_add_ps(s1, _mm256_loadu_ps(p + i + 8));
    s2 = _mm256_add_ps(s2, _mm256_loadu_ps(p + i + 16));
    s3 = _mm256_add_ps(s3, _mm256_loadu_ps(p + i + 24));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  float total = 0;
  for (const float x : lanes) total += x;
  return total;
}
#endif

// The sum of p[0, n) (n a multiple of 32 for the vector path), read as fast as this CPU can.
inline float read_sum(const float* p, std::int64_t n) {
#if defined(__x86_64__)
  static const bool avx2 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  if (avx2) return read_avx2(p, n);
#endif
  return read_plain(p, n);
}

}  // namespace kael::bench
