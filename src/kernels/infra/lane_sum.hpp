// The sum of term(i) for i in [0, n), in double, in eight lanes folded pairwise: independent
// chains that the compiler keeps in vector registers, where one chain would wait on each add's
// latency (layer_norm's backward row sums were most of its time). A fixed order, whatever the
// threads. For the baseline units only (an AVX unit including it could lend the linker its copy).
#pragma once

#include <cstdint>

namespace kael::kernels {

template <class F>
double lane_sum_double(std::int64_t n, F&& term) {
  constexpr int kLanes = 8;
  double acc[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] += term(i + j);
  double tail = 0;
  for (; i < n; ++i) tail += term(i);
  for (int width = kLanes / 2; width > 0; width /= 2)
    for (int j = 0; j < width; ++j) acc[j] += acc[j + width];
  return acc[0] + tail;
}

}  // namespace kael::kernels
