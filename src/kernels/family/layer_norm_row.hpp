// One row of layer_norm, written as plain loops with sixteen independent lanes so that the
// compiler vectorizes them at whatever ISA the including unit is built for (SSE2 in
// targets/portable/, AVX2 and AVX-512 in their units), without reordering any sum: every set
// gives the same bits. `static`: each unit keeps its own copy (see kernel_table.hpp).
#pragma once

#include <cmath>
#include <cstdint>

namespace kael::kernels {

// Sum of (x[i] - shift) (squared with `square`), in sixteen lanes folded pairwise.
template <bool square>
static inline float lane_sum(const float* x, std::int64_t n, float shift) {
  constexpr int kLanes = 16;
  float acc[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) {
      const float d = x[i + j] - shift;
      acc[j] += square ? d * d : d;
    }
  float tail = 0.0f;
  for (; i < n; ++i) {
    const float d = x[i] - shift;
    tail += square ? d * d : d;
  }
  for (int width = kLanes / 2; width > 0; width /= 2)
    for (int j = 0; j < width; ++j) acc[j] += acc[j + width];
  return acc[0] + tail;
}

// out (C) = (x - mean) / sqrt(var + eps) * weight + bias. Two passes (mean, then squared
// deviations): the residual stream can carry a large common offset, which the one-pass
// E[x^2] - E[x]^2 would cancel catastrophically. weight and bias may be null (1 and 0);
// mean_out and rstd_out, where not null, receive the row's mean and 1 / sqrt(var + eps).
static inline void layer_norm_row_lanes(float* out, float* mean_out, float* rstd_out, const float* x,
                                        const float* weight, const float* bias, std::int64_t C, float eps) {
  const float mean = lane_sum<false>(x, C, 0.0f) / static_cast<float>(C);
  const float var = lane_sum<true>(x, C, mean) / static_cast<float>(C);
  const float rstd = 1.0f / std::sqrt(var + eps);
  if (mean_out != nullptr) *mean_out = mean;
  if (rstd_out != nullptr) *rstd_out = rstd;
  if (weight != nullptr && bias != nullptr) {
    for (std::int64_t i = 0; i < C; ++i) out[i] = (x[i] - mean) * rstd * weight[i] + bias[i];
    return;
  }
  for (std::int64_t i = 0; i < C; ++i) {
    const float y = (x[i] - mean) * rstd;
    out[i] = (weight != nullptr ? y * weight[i] : y) + (bias != nullptr ? bias[i] : 0.0f);
  }
}

}  // namespace kael::kernels
