#include "kernels/norm.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/cpu_features.hpp"
#include "kernels/isa.hpp"
#include "kernels/thread_pool.hpp"

namespace kael::kernels {
namespace {

// Sum of x, in sixteen lanes folded pairwise (vectorizes without -ffast-math).
float lane_sum(const float* x, std::int64_t n, float shift) {
  constexpr int kLanes = 16;
  float acc[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] += x[i + j] - shift;
  float tail = 0.0f;
  for (; i < n; ++i) tail += x[i] - shift;
  for (int width = kLanes / 2; width > 0; width /= 2)
    for (int j = 0; j < width; ++j) acc[j] += acc[j + width];
  return acc[0] + tail;
}

float lane_sum_squares(const float* x, std::int64_t n, float shift) {
  constexpr int kLanes = 16;
  float acc[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] += (x[i + j] - shift) * (x[i + j] - shift);
  float tail = 0.0f;
  for (; i < n; ++i) tail += (x[i] - shift) * (x[i] - shift);
  for (int width = kLanes / 2; width > 0; width /= 2)
    for (int j = 0; j < width; ++j) acc[j] += acc[j + width];
  return acc[0] + tail;
}

void layernorm_row(float* out, const float* x, const float* weight, const float* bias, std::int64_t C, float eps) {
  // Two passes (mean, then squared deviations): the residual stream can carry a large common
  // offset, which the one-pass E[x^2] - E[x]^2 would cancel catastrophically.
  const float mean = lane_sum(x, C, 0.0f) / static_cast<float>(C);
  const float var = lane_sum_squares(x, C, mean) / static_cast<float>(C);
  const float rstd = 1.0f / std::sqrt(var + eps);
  for (std::int64_t i = 0; i < C; ++i) out[i] = (x[i] - mean) * rstd * weight[i] + bias[i];
}

}  // namespace

void layernorm(float* out, const float* inp, const float* weight, const float* bias, std::int64_t T, std::int64_t C,
               float eps) {
  const std::int64_t min_rows = std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(1, C));
  parallel_for(T, min_rows, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t t = first; t < last; ++t) layernorm_row(out + t * C, inp + t * C, weight, bias, C, eps);
  });
}

void softmax(float* out, const float* inp, std::int64_t n) {
  if (active_isa() == Isa::avx2)
    avx2::softmax(out, inp, n);
  else
    portable::softmax(out, inp, n);
}

}  // namespace kael::kernels
