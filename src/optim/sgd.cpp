// torch.optim.SGD (sgd.hpp). One fused pass per parameter: weight decay, momentum and the
// update for each element at once, in the parameter's dtype, the scalars rounded to it as
// torch's kernels round them.
#include "kael/optim/sgd.hpp"

#include "kael/core/error.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "kernels/cuda.hpp"
#include "kernels/optim_arith.hpp"
#include "optim/checks.hpp"

namespace kael::optim {

namespace {

template <class T>
kernels::arith::SgdConstants<T> sgd_constants(const SGDOptions& o, double lr) {
  return {static_cast<T>(o.weight_decay), static_cast<T>(o.momentum), static_cast<T>(1.0 - o.dampening),
          static_cast<T>(-lr), o.weight_decay != 0, o.nesterov};
}

template <class T>
void sgd_update(T* p, const T* g, T* buf, bool first, std::int64_t n, const SGDOptions& o, double lr) {
  const kernels::arith::SgdConstants<T> c = sgd_constants<T>(o, lr);
  // By value: a captured reference to a T could alias p[i], and the loop would not vectorize.
  detail::parallel_elements(n, [=](std::int64_t begin, std::int64_t end) {
    if (!buf) {
      for (std::int64_t i = begin; i < end; ++i) kernels::arith::sgd_element(p[i], g[i], c);
      return;
    }
    for (std::int64_t i = begin; i < end; ++i) kernels::arith::sgd_momentum_element(p[i], g[i], buf[i], first, c);
  });
}

}  // namespace

SGD::SGD(std::vector<Tensor> params, const SGDOptions& options)
    : SGD(std::vector<ParamGroup<SGDOptions>>{{std::move(params), options}}) {}

SGD::SGD(std::vector<ParamGroup<SGDOptions>> groups)
    : OptimizerOf("SGD", std::move(groups)) {
  for (const SGDOptions& o : options_) check(o);
}

void SGD::check(const SGDOptions& o) {
  detail::check_non_negative("SGD", "learning rate", o.lr);
  detail::check_non_negative("SGD", "momentum value", o.momentum);
  detail::check_non_negative("SGD", "dampening value", o.dampening);
  detail::check_non_negative("SGD", "weight_decay value", o.weight_decay);
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
    throw ValueError("SGD: Nesterov momentum requires a momentum and zero dampening");
}

void SGD::step() {
  autograd::NoGradGuard no_grad;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor g = gradient(i);
    if (!g.defined()) continue;  // torch skips parameters without a gradient
    const SGDOptions& o = options_[group_of(i)];
    ParamState& s = state_[i];
    const bool use_momentum = o.momentum != 0;
    const bool first = use_momentum && s.buffers.empty();
    if (first) s.buffers.push_back(detail::zero_buffer(params_[i]));
    Tensor* buf = use_momentum ? &s.buffers[0] : nullptr;
    update_in_place(i, [&](Tensor& p) {
      if (p.device().type != Device::Type::cpu) {
        detail::require_f32_on_device(name_, p);
        kernels::cuda::sgd_f32(p.device().index, p.device_data<float>(), g.device_data<float>(),
                               buf ? buf->device_data<float>() : nullptr, first, p.numel(), sgd_constants<float>(o, o.lr));
      } else if (p.dtype() == DType::F32)
        sgd_update(p.data<float>(), g.data<float>(), buf ? buf->data<float>() : nullptr, first, p.numel(), o, o.lr);
      else
        sgd_update(p.data<double>(), g.data<double>(), buf ? buf->data<double>() : nullptr, first, p.numel(), o, o.lr);
    });
  }
}

Optimizer::Hyperparameters SGD::hyperparameters(std::size_t group) const {
  const SGDOptions& o = options_.at(group);
  return {{"momentum", detail::scalar_tensor(o.momentum)},
          {"dampening", detail::scalar_tensor(o.dampening)},
          {"weight_decay", detail::scalar_tensor(o.weight_decay)},
          {"nesterov", full({}, o.nesterov, DType::BOOL)}};
}

void SGD::set_hyperparameters(const std::vector<std::map<std::string, Tensor>>& groups) {
  std::vector<SGDOptions> all = options_;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    SGDOptions& o = all[g];
    o.lr = detail::scalar_value(name_, groups[g], "lr", g);
    o.momentum = detail::scalar_value(name_, groups[g], "momentum", g);
    o.dampening = detail::scalar_value(name_, groups[g], "dampening", g);
    o.weight_decay = detail::scalar_value(name_, groups[g], "weight_decay", g);
    o.nesterov = detail::scalar_value(name_, groups[g], "nesterov", g) != 0;
    check(o);
  }
  options_ = all;
}

}  // namespace kael::optim
