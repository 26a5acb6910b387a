// torch.optim.Adam and AdamW (adam.hpp). One fused pass per parameter; the scalars are rounded
// to the parameter's dtype where torch's kernels round them, the bias corrections computed in
// double as torch computes them in Python. F32 with decoupled or no decay and the usual
// beta1 runs the kernel (kernels::adamw_update, what `kael train` updates GPT-2 with); the
// other cases run adam_loop.
#include "kael/optim/adam.hpp"

#include <cmath>
#include <type_traits>

#include "kael/core/error.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "kernels/cuda.hpp"
#include "kernels/optim_arith.hpp"
#include "kernels/training.hpp"
#include "optim/checks.hpp"

namespace kael::optim {

namespace {

struct AdamScalars {
  double decay_factor;  // AdamW: 1 - lr * weight_decay (1: none)
  double l2;            // Adam: weight_decay added to the gradient (0: none)
  double beta1, beta2, eps;
  double step_size;     // lr / (1 - beta1^t)
  double bias2_sqrt;    // sqrt(1 - beta2^t)

  bool adds_l2() const { return l2 != 0.0; }
  bool lerp_low() const { return 1.0 - beta1 < 0.5; }  // torch's lerp: from the nearer end
};

template <class T>
kernels::arith::AdamConstants<T> constants_of(const AdamScalars& s) {
  const T w1 = static_cast<T>(1.0 - s.beta1);
  return {static_cast<T>(s.decay_factor), static_cast<T>(s.l2), w1, T(1) - w1, static_cast<T>(s.beta2),
          static_cast<T>(1.0 - s.beta2), static_cast<T>(s.eps), static_cast<T>(-s.step_size), static_cast<T>(s.bias2_sqrt)};
}

// The loop for one choice of the branches, so that it has no control flow and vectorizes.
template <class T, bool kAddsL2, bool kLerpLow>
void adam_loop(T* p, const T* g, T* m, T* v, std::int64_t n, const AdamScalars& s) {
  const kernels::arith::AdamConstants<T> c = constants_of<T>(s);
  // By value: a captured reference to a T could alias p[i], and the loop would not vectorize.
  detail::parallel_elements(n, [=](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) kernels::arith::adam_element<T, kAddsL2, kLerpLow>(p[i], g[i], m[i], v[i], c);
  });
}

// The kernel's scalars, rounded to float as adam_loop<float> rounds them.
kernels::AdamWScalars kernel_scalars(const AdamScalars& s) {
  kernels::AdamWScalars k;
  k.decay = static_cast<float>(s.decay_factor);
  k.one_minus_beta1 = static_cast<float>(1.0 - s.beta1);
  k.beta2 = static_cast<float>(s.beta2);
  k.one_minus_beta2 = static_cast<float>(1.0 - s.beta2);
  k.neg_step_size = static_cast<float>(-s.step_size);
  k.bias_correction2_sqrt = static_cast<float>(s.bias2_sqrt);
  k.eps = static_cast<float>(s.eps);
  return k;  // grad_scale 1: the gradient as given
}

template <class T>
void adam_update(T* p, const T* g, T* m, T* v, std::int64_t n, const AdamScalars& s) {
  const bool adds_l2 = s.adds_l2(), lerp_low = s.lerp_low();
  // The kernel is the F32 update of decoupled (or no) decay with m lerped from its own end, as the
  // training step needs it. Adam's L2 adds to the gradient, a lerp with weight >= 0.5 starts from
  // the gradient's end, and F64 is not a kernel dtype: those keep the loop below.
  if constexpr (std::is_same_v<T, float>) {
    if (!adds_l2 && lerp_low) return kernels::adamw_update(p, m, v, g, n, kernel_scalars(s));
  }
  if (lerp_low) {
    adds_l2 ? adam_loop<T, true, true>(p, g, m, v, n, s) : adam_loop<T, false, true>(p, g, m, v, n, s);
  } else {
    adds_l2 ? adam_loop<T, true, false>(p, g, m, v, n, s) : adam_loop<T, false, false>(p, g, m, v, n, s);
  }
}

}  // namespace

namespace {

std::vector<ParamGroup<AdamOptions>> as_adam_groups(std::vector<ParamGroup<AdamWOptions>> groups) {
  std::vector<ParamGroup<AdamOptions>> out;
  for (auto& g : groups)
    out.push_back({std::move(g.params), {g.options.lr, g.options.betas, g.options.eps, g.options.weight_decay}});
  return out;
}

}  // namespace

Adam::Adam(std::vector<Tensor> params, const AdamOptions& options)
    : Adam(std::vector<ParamGroup<AdamOptions>>{{std::move(params), options}}) {}

Adam::Adam(std::vector<ParamGroup<AdamOptions>> groups) : Adam("Adam", std::move(groups), false) {}

Adam::Adam(std::string name, std::vector<ParamGroup<AdamOptions>> groups, bool decoupled)
    : OptimizerOf(std::move(name), std::move(groups)), decoupled_(decoupled) {
  for (const AdamOptions& o : options_) check(o);
}

void Adam::check(const AdamOptions& o) const {
  detail::check_non_negative(name_, "learning rate", o.lr);
  detail::check_non_negative(name_, "epsilon value", o.eps);
  detail::check_beta(name_, 0, o.betas.first);
  detail::check_beta(name_, 1, o.betas.second);
  detail::check_non_negative(name_, "weight_decay value", o.weight_decay);
}

void Adam::step() {
  autograd::NoGradGuard no_grad;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor g = gradient(i);
    if (!g.defined()) continue;  // torch skips parameters without a gradient
    const AdamOptions& o = options_[group_of(i)];
    ParamState& st = state_[i];
    if (st.buffers.empty()) {
      st.buffers = {detail::zero_buffer(params_[i]), detail::zero_buffer(params_[i])};
      st.step = 0;
    }
    st.step += 1;
    const double t = static_cast<double>(st.step);
    const double wd = o.weight_decay;
    AdamScalars s{};
    s.decay_factor = decoupled_ && wd != 0 ? 1.0 - o.lr * wd : 1.0;
    s.l2 = decoupled_ ? 0.0 : wd;
    s.beta1 = o.betas.first;
    s.beta2 = o.betas.second;
    s.eps = o.eps;
    s.step_size = o.lr / (1.0 - std::pow(s.beta1, t));
    s.bias2_sqrt = std::sqrt(1.0 - std::pow(s.beta2, t));
    Tensor& m = st.buffers[0];
    Tensor& v = st.buffers[1];
    update_in_place(i, [&](Tensor& p) {
      if (p.device().type != Device::Type::cpu) {
        detail::require_f32_on_device(name_, p);
        kernels::cuda::adam_f32(p.device().index, p.device_data<float>(), g.device_data<float>(), m.device_data<float>(),
                                v.device_data<float>(), p.numel(), constants_of<float>(s), s.adds_l2(), s.lerp_low());
      } else if (p.dtype() == DType::F32)
        adam_update(p.data<float>(), g.data<float>(), m.data<float>(), v.data<float>(), p.numel(), s);
      else
        adam_update(p.data<double>(), g.data<double>(), m.data<double>(), v.data<double>(), p.numel(), s);
    });
  }
}

Optimizer::Hyperparameters Adam::hyperparameters(std::size_t group) const {
  const AdamOptions& o = options_.at(group);
  return {{"betas", from_vector(std::vector<double>{o.betas.first, o.betas.second}, {2})},
          {"eps", detail::scalar_tensor(o.eps)},
          {"weight_decay", detail::scalar_tensor(o.weight_decay)},
          {"decoupled_weight_decay", full({}, decoupled_, DType::BOOL)}};
}

void Adam::set_hyperparameters(const std::vector<std::map<std::string, Tensor>>& groups) {
  std::vector<AdamOptions> all = options_;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const std::map<std::string, Tensor>& values = groups[g];
    const std::string prefix = name_ + ".load_state_dict: param_groups." + std::to_string(g) + ".";
    AdamOptions& o = all[g];
    o.lr = detail::scalar_value(name_, values, "lr", g);
    const auto betas = values.find("betas");
    if (betas == values.end()) throw ValueError(name_ + ".load_state_dict: the state has no param_groups." + std::to_string(g) + ".betas");
    if (!betas->second.defined() || betas->second.numel() != 2) throw ValueError(prefix + "betas must hold two numbers");
    o.betas = {betas->second.value_as_double(0), betas->second.value_as_double(1)};
    o.eps = detail::scalar_value(name_, values, "eps", g);
    o.weight_decay = detail::scalar_value(name_, values, "weight_decay", g);
    const bool decoupled = detail::scalar_value(name_, values, "decoupled_weight_decay", g) != 0;
    if (decoupled != decoupled_)
      throw ValueError(name_ + ".load_state_dict: the state is " + (decoupled ? "AdamW" : "Adam") +
                       "'s (decoupled_weight_decay " + (decoupled ? "true" : "false") + ")");
    check(o);
  }
  options_ = all;
}

AdamW::AdamW(std::vector<Tensor> params, const AdamWOptions& options)
    : AdamW(std::vector<ParamGroup<AdamWOptions>>{{std::move(params), options}}) {}

AdamW::AdamW(std::vector<ParamGroup<AdamWOptions>> groups) : Adam("AdamW", as_adam_groups(std::move(groups)), true) {}

AdamWOptions AdamW::options(std::size_t group) const {
  const AdamOptions o = Adam::options(group);
  return {o.lr, o.betas, o.eps, o.weight_decay};
}

}  // namespace kael::optim
