// Plain references for training.hpp: the formulas in double (long double for the sum), no
// threads.
#include <cmath>

#include "kernels/training.hpp"

namespace kael::kernels::ref {

void adamw_update(float* param, float* m, float* v, const float* grad, std::int64_t n, const AdamWScalars& s) {
  for (std::int64_t i = 0; i < n; ++i) {
    const double g = grad[i] * s.grad_scale;  // the float product, as the kernels round it
    const double mi = m[i] + static_cast<double>(s.one_minus_beta1) * (g - m[i]);
    const double vi = v[i] * static_cast<double>(s.beta2) + static_cast<double>(s.one_minus_beta2) * g * g;
    const double denom = std::sqrt(vi) / s.bias_correction2_sqrt + s.eps;
    param[i] = static_cast<float>(param[i] * static_cast<double>(s.decay) + s.neg_step_size * mi / denom);
    m[i] = static_cast<float>(mi);
    v[i] = static_cast<float>(vi);
  }
}

double sum_of_squares(const float* x, std::int64_t n) {
  long double sum = 0;
  for (std::int64_t i = 0; i < n; ++i) sum += static_cast<long double>(x[i]) * x[i];
  return static_cast<double>(sum);
}

}  // namespace kael::kernels::ref
