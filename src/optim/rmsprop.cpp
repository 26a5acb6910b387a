// torch.optim.RMSprop (rmsprop.hpp). One fused pass per parameter, in its dtype.
#include "kael/optim/rmsprop.hpp"

#include <cmath>

#include "kael/core/error.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "optim/checks.hpp"

namespace kael::optim {

namespace {

template <class T>
void rmsprop_update(T* p, const T* g, T* square_avg, T* buf, T* grad_avg, std::int64_t n, const RMSpropOptions& o) {
  const T alpha = static_cast<T>(o.alpha), keep = static_cast<T>(1.0 - o.alpha);
  const T eps = static_cast<T>(o.eps), wd = static_cast<T>(o.weight_decay);
  const T momentum = static_cast<T>(o.momentum), step = static_cast<T>(-o.lr);
  const bool decays = o.weight_decay != 0, centered = o.centered, uses_momentum = o.momentum > 0;
  detail::parallel_elements(n, [=](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const T d = decays ? g[i] + wd * p[i] : g[i];
      const T sq = square_avg[i] * alpha + keep * d * d;
      square_avg[i] = sq;
      T avg;
      if (centered) {
        const T ga = grad_avg[i] + keep * (d - grad_avg[i]);
        grad_avg[i] = ga;
        avg = std::sqrt(sq - ga * ga) + eps;
      } else {
        avg = std::sqrt(sq) + eps;
      }
      if (uses_momentum) {
        const T b = buf[i] * momentum + d / avg;
        buf[i] = b;
        p[i] += step * b;
      } else {
        p[i] += step * d / avg;
      }
    }
  });
}

}  // namespace

RMSprop::RMSprop(std::vector<Tensor> params, const RMSpropOptions& options)
    : RMSprop(std::vector<ParamGroup<RMSpropOptions>>{{std::move(params), options}}) {}

RMSprop::RMSprop(std::vector<ParamGroup<RMSpropOptions>> groups)
    : OptimizerOf("RMSprop", std::move(groups)) {
  for (const RMSpropOptions& o : options_) check(o);
}

void RMSprop::check(const RMSpropOptions& o) {
  detail::check_non_negative("RMSprop", "learning rate", o.lr);
  detail::check_non_negative("RMSprop", "epsilon value", o.eps);
  detail::check_non_negative("RMSprop", "momentum value", o.momentum);
  detail::check_non_negative("RMSprop", "weight_decay value", o.weight_decay);
  detail::check_non_negative("RMSprop", "alpha value", o.alpha);
}

void RMSprop::step() {
  autograd::NoGradGuard no_grad;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor g = gradient(i);
    if (!g.defined()) continue;  // torch skips parameters without a gradient
    const RMSpropOptions& o = options_[group_of(i)];
    ParamState& st = state_[i];
    if (st.buffers.empty())
      st.buffers = {detail::zero_buffer(params_[i]), detail::zero_buffer(params_[i]), detail::zero_buffer(params_[i])};
    st.step += 1;
    update_in_place(i, [&](Tensor& p) {
      if (p.dtype() == DType::F32)
        rmsprop_update(p.data<float>(), g.data<float>(), st.buffers[0].data<float>(), st.buffers[1].data<float>(),
                       st.buffers[2].data<float>(), p.numel(), o);
      else
        rmsprop_update(p.data<double>(), g.data<double>(), st.buffers[0].data<double>(), st.buffers[1].data<double>(),
                       st.buffers[2].data<double>(), p.numel(), o);
    });
  }
}

Optimizer::Hyperparameters RMSprop::hyperparameters(std::size_t group) const {
  const RMSpropOptions& o = options_.at(group);
  return {{"alpha", detail::scalar_tensor(o.alpha)},
          {"eps", detail::scalar_tensor(o.eps)},
          {"weight_decay", detail::scalar_tensor(o.weight_decay)},
          {"momentum", detail::scalar_tensor(o.momentum)},
          {"centered", full({}, o.centered, DType::BOOL)}};
}

void RMSprop::set_hyperparameters(const std::vector<std::map<std::string, Tensor>>& groups) {
  std::vector<RMSpropOptions> all = options_;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    RMSpropOptions& o = all[g];
    o.lr = detail::scalar_value(name_, groups[g], "lr", g);
    o.alpha = detail::scalar_value(name_, groups[g], "alpha", g);
    o.eps = detail::scalar_value(name_, groups[g], "eps", g);
    o.weight_decay = detail::scalar_value(name_, groups[g], "weight_decay", g);
    o.momentum = detail::scalar_value(name_, groups[g], "momentum", g);
    o.centered = detail::scalar_value(name_, groups[g], "centered", g) != 0;
    check(o);
  }
  options_ = all;
}

}  // namespace kael::optim
