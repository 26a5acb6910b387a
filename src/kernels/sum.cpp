// The portable sum (sum.hpp) and its reference.
#include "kernels/sum.hpp"

namespace kael::kernels {

namespace ref {
double sum(const float* x, std::int64_t n) {
  long double total = 0;
  for (std::int64_t i = 0; i < n; ++i) total += x[i];
  return static_cast<double>(total);
}
}  // namespace ref

namespace portable {

double sum(const float* x, std::int64_t n) {
  constexpr int kLanes = 32;
  double lanes[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += x[i + l];
  for (int l = 0; i + l < n; ++l) lanes[l] += x[i + l];
  double total = 0;
  for (const double lane : lanes) total += lane;
  return total;
}

}  // namespace portable

}  // namespace kael::kernels
