// torch.optim.Adadelta (adadelta.hpp). One fused pass per parameter, in its dtype.
#include "kael/optim/adadelta.hpp"

#include <cmath>

#include "kael/core/error.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "optim/checks.hpp"

namespace kael::optim {

namespace {

template <class T>
void adadelta_update(T* p, const T* g, T* square_avg, T* acc_delta, std::int64_t n, const AdadeltaOptions& o, double lr) {
  const T rho = static_cast<T>(o.rho), keep = static_cast<T>(1.0 - o.rho);
  const T eps = static_cast<T>(o.eps), wd = static_cast<T>(o.weight_decay), step = static_cast<T>(-lr);
  const bool decays = o.weight_decay != 0;
  // By value: a captured reference to a T could alias p[i], and the loop would not vectorize.
  detail::parallel_elements(n, [=](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const T d = decays ? g[i] + wd * p[i] : g[i];
      const T sq = square_avg[i] * rho + keep * d * d;
      const T delta = std::sqrt(acc_delta[i] + eps) / std::sqrt(sq + eps) * d;
      square_avg[i] = sq;
      acc_delta[i] = acc_delta[i] * rho + keep * delta * delta;
      p[i] += step * delta;
    }
  });
}

}  // namespace

Adadelta::Adadelta(std::vector<Tensor> params, const AdadeltaOptions& options)
    : Adadelta(std::vector<ParamGroup<AdadeltaOptions>>{{std::move(params), options}}) {}

Adadelta::Adadelta(std::vector<ParamGroup<AdadeltaOptions>> groups)
    : OptimizerOf("Adadelta", std::move(groups)) {
  for (const AdadeltaOptions& o : options_) check(o);
}

void Adadelta::check(const AdadeltaOptions& o) {
  detail::check_non_negative("Adadelta", "learning rate", o.lr);
  detail::check_non_negative("Adadelta", "epsilon value", o.eps);
  detail::check_non_negative("Adadelta", "weight_decay value", o.weight_decay);
  if (!(o.rho >= 0.0 && o.rho <= 1.0)) throw ValueError(str("Adadelta: invalid rho value: ", o.rho));
}

void Adadelta::step() {
  autograd::NoGradGuard no_grad;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor g = gradient(i);
    if (!g.defined()) continue;  // torch skips parameters without a gradient
    const AdadeltaOptions& o = options_[group_of(i)];
    ParamState& st = state_[i];
    if (st.buffers.empty()) st.buffers = {detail::zero_buffer(params_[i]), detail::zero_buffer(params_[i])};
    st.step += 1;
    Tensor& square_avg = st.buffers[0];
    Tensor& acc_delta = st.buffers[1];
    update_in_place(i, [&](Tensor& p) {
      if (p.dtype() == DType::F32)
        adadelta_update(p.data<float>(), g.data<float>(), square_avg.data<float>(), acc_delta.data<float>(), p.numel(),
                        o, o.lr);
      else
        adadelta_update(p.data<double>(), g.data<double>(), square_avg.data<double>(), acc_delta.data<double>(),
                        p.numel(), o, o.lr);
    });
  }
}

Optimizer::Hyperparameters Adadelta::hyperparameters(std::size_t group) const {
  const AdadeltaOptions& o = options_.at(group);
  return {{"rho", detail::scalar_tensor(o.rho)},
          {"eps", detail::scalar_tensor(o.eps)},
          {"weight_decay", detail::scalar_tensor(o.weight_decay)}};
}

void Adadelta::set_hyperparameters(const std::vector<std::map<std::string, Tensor>>& groups) {
  std::vector<AdadeltaOptions> all = options_;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    AdadeltaOptions& o = all[g];
    o.lr = detail::scalar_value(name_, groups[g], "lr", g);
    o.rho = detail::scalar_value(name_, groups[g], "rho", g);
    o.eps = detail::scalar_value(name_, groups[g], "eps", g);
    o.weight_decay = detail::scalar_value(name_, groups[g], "weight_decay", g);
    check(o);
  }
  options_ = all;
}

}  // namespace kael::optim
