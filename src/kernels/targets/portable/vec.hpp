// Inline building blocks for the fast kernels, written as plain loops that g++ -O3
// vectorizes at the baseline ISA (SSE2): independent lanes, no reassociation needed.
#pragma once

#include <cstdint>

namespace kael::kernels::vec {

// Sum of a[i] * b[i]. Sixteen independent partial sums let the compiler keep them in vector
// registers without -ffast-math; they are folded pairwise at the end. The order is fixed by
// n alone, so equal inputs give equal results wherever this is called.
inline float dot(const float* __restrict a, const float* __restrict b, std::int64_t n) {
  constexpr int kLanes = 16;
  float acc[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] += a[i + j] * b[i + j];
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i] * b[i];
  for (int width = kLanes / 2; width > 0; width /= 2)
    for (int j = 0; j < width; ++j) acc[j] += acc[j + width];
  return acc[0] + tail;
}

}  // namespace kael::kernels::vec
