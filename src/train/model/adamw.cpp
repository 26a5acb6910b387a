#include "kael/train/adamw.hpp"

#include <cmath>

#include "kael/core/error.hpp"
#include "kernels/training.hpp"

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

void AdamW::step(std::span<Parameter> parameters, double lr, float grad_scale) {
  if (parameters.size() != m_.size())
    throw ValueError(str("AdamW.step: ", parameters.size(), " parameters given, ", m_.size(), " expected"));
  for (std::size_t i = 0; i < parameters.size(); ++i)
    if (static_cast<std::size_t>(parameters[i].numel) != m_[i].size())
      throw ValueError(str("AdamW.step: parameter '", parameters[i].name, "' has ", parameters[i].numel,
                           " elements, ", m_[i].size(), " expected"));
  ++step_;
  // Where torch rounds a Python float to the tensor's float: each scalar below.
  const double t = static_cast<double>(step_);
  kernels::AdamWScalars scalars;
  scalars.one_minus_beta1 = static_cast<float>(1.0 - options_.beta1);
  scalars.beta2 = static_cast<float>(options_.beta2);
  scalars.one_minus_beta2 = static_cast<float>(1.0 - options_.beta2);
  scalars.neg_step_size = static_cast<float>(-(lr / (1.0 - std::pow(options_.beta1, t))));
  scalars.bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(options_.beta2, t)));
  scalars.eps = static_cast<float>(options_.eps);
  scalars.grad_scale = grad_scale;
  const float decay = static_cast<float>(1.0 - lr * options_.weight_decay);
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    Parameter& p = parameters[i];
    // Multiplying by exactly 1 changes no bit: the tensors without decay take that.
    scalars.decay = p.weight_decay && options_.weight_decay != 0.0 ? decay : 1.0f;
    kernels::adamw_update(p.data, m_[i].data(), v_[i].data(), p.grad, p.numel, scalars);
  }
}

}  // namespace kael::train
