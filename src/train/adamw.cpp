#include "kael/train/adamw.hpp"

#include <cmath>

#include "kael/core/error.hpp"
#include "kernels/thread_pool.hpp"

namespace kael::train {

AdamW::AdamW(std::span<const Parameter> parameters, const AdamWOptions& options) : options_(options) {
  for (const Parameter& p : parameters) {
    m_.emplace_back(static_cast<std::size_t>(p.numel), 0.0f);
    v_.emplace_back(static_cast<std::size_t>(p.numel), 0.0f);
  }
}

Moments AdamW::moments(std::size_t i) {
  if (i >= m_.size()) throw IndexError(str("AdamW has ", m_.size(), " parameters, not ", i + 1));
  return {m_[i], v_[i]};
}

void AdamW::step(std::span<Parameter> parameters, double lr) {
  if (parameters.size() != m_.size())
    throw ValueError(str("AdamW.step: ", parameters.size(), " parameters given, ", m_.size(), " expected"));
  for (std::size_t i = 0; i < parameters.size(); ++i)
    if (static_cast<std::size_t>(parameters[i].numel) != m_[i].size())
      throw ValueError(str("AdamW.step: parameter '", parameters[i].name, "' has ", parameters[i].numel,
                           " elements, ", m_[i].size(), " expected"));
  ++step_;
  // Where torch rounds a Python float to the tensor's float: each scalar below.
  const double t = static_cast<double>(step_);
  const float decay = static_cast<float>(1.0 - lr * options_.weight_decay);
  const float one_minus_beta1 = static_cast<float>(1.0 - options_.beta1);
  const float beta2 = static_cast<float>(options_.beta2);
  const float one_minus_beta2 = static_cast<float>(1.0 - options_.beta2);
  const float neg_step_size = static_cast<float>(-(lr / (1.0 - std::pow(options_.beta1, t))));
  const float bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(options_.beta2, t)));
  const float eps = static_cast<float>(options_.eps);
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    Parameter& p = parameters[i];
    float* m = m_[i].data();
    float* v = v_[i].data();
    const bool decays = p.weight_decay && options_.weight_decay != 0.0;
    kernels::parallel_for(p.numel, 1 << 15, [&](std::int64_t j0, std::int64_t j1) {
      for (std::int64_t j = j0; j < j1; ++j) {
        const float g = p.grad[j];
        float x = p.data[j];
        if (decays) x *= decay;
        m[j] = m[j] + one_minus_beta1 * (g - m[j]);
        v[j] = v[j] * beta2 + one_minus_beta2 * g * g;
        const float denom = std::sqrt(v[j]) / bias_correction2_sqrt + eps;
        x += neg_step_size * (m[j] / denom);
        p.data[j] = x;
      }
    });
  }
}

}  // namespace kael::train
