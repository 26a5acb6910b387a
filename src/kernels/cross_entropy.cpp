#include "kernels/cross_entropy.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/dispatch/kernel_table.hpp"

namespace kael::kernels {
namespace {

// The largest of x (n >= 1), in sixteen lanes the compiler vectorizes (where a search for the
// largest one's index is one branchy chain).
float lane_max(const float* x, std::int64_t n) {
  constexpr int kLanes = 16;
  float acc[kLanes];
  std::fill(acc, acc + kLanes, x[0]);
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
  for (; i < n; ++i) acc[0] = x[i] > acc[0] ? x[i] : acc[0];
  float largest = acc[0];
  for (int j = 1; j < kLanes; ++j) largest = acc[j] > largest ? acc[j] : largest;
  return largest;
}

// The calling thread's row of at least n floats, for a forward without dlogits.
float* row_scratch(std::int64_t n) {
  thread_local std::vector<float> buffer;
  if (static_cast<std::int64_t>(buffer.size()) < n) buffer.resize(static_cast<std::size_t>(n));
  return buffer.data();
}

}  // namespace

float cross_entropy_row(float* dlogits, const float* logits, std::int64_t target, float dscale, std::int64_t V) {
  if (target < 0) {
    if (dlogits != nullptr) std::fill(dlogits, dlogits + V, 0.0f);
    return 0.0f;
  }
  const float margin = lane_max(logits, V) - logits[target];
  float* p = dlogits != nullptr ? dlogits : row_scratch(V);
  active_kernels().softmax(p, logits, V);
  const float loss = margin - std::log(lane_max(p, V));
  if (dlogits == nullptr) return loss;
  p[target] -= 1.0f;
  for (std::int64_t j = 0; j < V; ++j) p[j] *= dscale;
  return loss;
}

namespace ref {

float cross_entropy_row(float* dlogits, const float* logits, std::int64_t target, float dscale, std::int64_t V) {
  if (target < 0) {
    if (dlogits != nullptr) std::fill(dlogits, dlogits + V, 0.0f);
    return 0.0f;
  }
  const double largest = *std::max_element(logits, logits + V);
  double sum = 0;
  for (std::int64_t j = 0; j < V; ++j) sum += std::exp(logits[j] - largest);
  const double loss = std::log(sum) - (logits[target] - largest);
  if (dlogits != nullptr) {
    for (std::int64_t j = 0; j < V; ++j)
      dlogits[j] = static_cast<float>((std::exp(logits[j] - largest) / sum - (j == target ? 1.0 : 0.0)) * dscale);
  }
  return static_cast<float>(loss);
}

}  // namespace ref
}  // namespace kael::kernels
