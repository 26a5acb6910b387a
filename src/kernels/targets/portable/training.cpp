// The portable training kernels (training.hpp): the scalar loops, in the order the other sets
// follow lane for lane.
#include <cmath>

#include "kernels/targets/portable/kernels.hpp"
#include "kernels/family/scalar_math.hpp"

namespace kael::kernels::portable {

void gelu_backward(float* dinp, const float* inp, const float* dout, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dinp[i] = dout[i] * gelu_tanh_derivative(inp[i]);
}

void adamw_update(float* param, float* m, float* v, const float* grad, std::int64_t n, const AdamWScalars& s) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float g = grad[i] * s.grad_scale;
    const float x = param[i] * s.decay;
    m[i] = m[i] + s.one_minus_beta1 * (g - m[i]);
    v[i] = v[i] * s.beta2 + s.one_minus_beta2 * g * g;
    const float denom = std::sqrt(v[i]) / s.bias_correction2_sqrt + s.eps;
    param[i] = x + s.neg_step_size * m[i] / denom;  // torch's addcdiv: (value * m) / denom
  }
}

double sum_of_squares(const float* x, std::int64_t n) {
  constexpr int kLanes = 16;
  double lanes[kLanes] = {};
  for (std::int64_t i = 0; i < n; ++i) {
    const double xi = x[i];
    lanes[i % kLanes] += xi * xi;
  }
  double total = 0;
  for (double lane : lanes) total += lane;
  return total;
}

}  // namespace kael::kernels::portable
