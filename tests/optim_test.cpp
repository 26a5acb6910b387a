// kael::optim: each optimizer's steps against the formulas worked by hand (in double, on one or
// two elements), skipped parameters, the state dict's round trip and errors, clip_grad_norm_.
// The same updates against torch.optim live in tests/python/test_optim_vs_torch.py.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kael/optim/adam.hpp"
#include "kael/optim/clip_grad.hpp"
#include "kael/optim/sgd.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"

namespace kael {
namespace {

using optim::Adam;
using optim::AdamW;
using optim::SGD;

// Gives p the gradient c (the gradient of sum(p * c)), dropping any earlier one.
void set_grad(Tensor& p, const std::vector<float>& c) {
  p.zero_grad();
  sum(mul(p, from_vector(c, p.shape()))).backward();
}

Tensor param(std::vector<float> values) {
  const auto n = static_cast<std::int64_t>(values.size());
  return from_vector(values, {n}).requires_grad_();
}

void expect_values(const Tensor& t, const std::vector<double>& expected, double tolerance = 1e-6) {
  const std::vector<float> got = t.to_vector<float>();
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], tolerance) << "element " << i;
}

TEST(OptimSgd, PlainStepIsLrTimesGradient) {
  Tensor p = param({1, 2});
  SGD sgd({p}, {.lr = 0.1});
  set_grad(p, {0.5, -1});
  sgd.step();
  expect_values(p, {1 - 0.1 * 0.5, 2 + 0.1 * 1});
  EXPECT_TRUE(p.grad().defined());  // step keeps the gradient; zero_grad drops it
  sgd.zero_grad();
  EXPECT_FALSE(p.grad().defined());
}

TEST(OptimSgd, MomentumBufferStartsAtTheFirstGradientWithWeightDecay) {
  Tensor p = param({1, 2});
  SGD sgd({p}, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.1});
  set_grad(p, {0.5, -1});
  sgd.step();  // d = g + 0.1 p = (0.6, -0.8) = buf; p -= 0.1 d
  expect_values(p, {0.94, 2.08});
  set_grad(p, {0.5, -1});
  sgd.step();  // d = (0.594, -0.792); buf = 0.9 (0.6, -0.8) + d = (1.134, -1.512); p -= 0.1 buf
  expect_values(p, {0.94 - 0.1134, 2.08 + 0.1512});
}

TEST(OptimSgd, NesterovAndDampening) {
  Tensor p = param({1, 2});
  SGD nesterov({p}, {.lr = 0.1, .momentum = 0.9, .nesterov = true});
  for (int i = 0; i < 2; ++i) {
    set_grad(p, {0.5, -1});
    nesterov.step();  // buf = g, then 1.9 g; the step is g + 0.9 buf: 1.9 g, then 2.71 g
  }
  expect_values(p, {1 - 0.1 * 4.61 * 0.5, 2 + 0.1 * 4.61});

  Tensor q = param({1, 2});
  SGD damped({q}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.5});
  for (int i = 0; i < 2; ++i) {
    set_grad(q, {0.5, -1});
    damped.step();  // buf = g (no dampening on the first step), then 0.9 g + 0.5 g
  }
  expect_values(q, {1 - 0.1 * 2.4 * 0.5, 2 + 0.1 * 2.4});
}

// Adam's update of one element by the formulas, in double.
struct AdamReference {
  double lr, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool decoupled = false;
  double p, m = 0, v = 0;
  int t = 0;
  void step(double g) {
    ++t;
    if (decoupled) p *= 1 - lr * weight_decay;
    else g += weight_decay * p;
    m = beta1 * m + (1 - beta1) * g;
    v = beta2 * v + (1 - beta2) * g * g;
    const double m_hat = m / (1 - std::pow(beta1, t));
    p -= lr * m_hat / (std::sqrt(v) / std::sqrt(1 - std::pow(beta2, t)) + eps);
  }
};

TEST(OptimAdam, StepsMatchTheFormulas) {
  Tensor p = param({1, -2});
  Adam adam({p}, {.lr = 0.1});
  AdamReference r0{.lr = 0.1, .p = 1}, r1{.lr = 0.1, .p = -2};
  const float grads[3][2] = {{1, 0.5}, {3, -0.25}, {-2, 4}};
  for (const auto& g : grads) {
    set_grad(p, {g[0], g[1]});
    adam.step();
    r0.step(g[0]);
    r1.step(g[1]);
  }
  expect_values(p, {r0.p, r1.p});
  // After the first step the update is lr times the gradient's sign (m_hat = g, v_hat = g^2).
  Tensor q = param({1});
  Adam first({q}, {.lr = 0.1});
  set_grad(q, {-7});
  first.step();
  expect_values(q, {1.1});
}

TEST(OptimAdam, L2WeightDecayGoesIntoTheGradient) {
  Tensor p = param({1, -2});
  Adam adam({p}, {.lr = 0.05, .betas = {0.8, 0.99}, .eps = 1e-6, .weight_decay = 0.3});
  AdamReference r0{.lr = 0.05, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.3, .p = 1};
  AdamReference r1 = r0;
  r1.p = -2;
  for (float g : {1.0f, 3.0f, -0.5f}) {
    set_grad(p, {g, g});
    adam.step();
    r0.step(g);
    r1.step(g);
  }
  expect_values(p, {r0.p, r1.p});
}

TEST(OptimAdamW, DecayIsDecoupled) {
  Tensor p = param({1, -2});
  AdamW adamw({p}, {.lr = 0.1});  // weight_decay 1e-2 by default
  EXPECT_DOUBLE_EQ(adamw.options().weight_decay, 1e-2);
  AdamReference r0{.lr = 0.1, .weight_decay = 1e-2, .decoupled = true, .p = 1};
  AdamReference r1 = r0;
  r1.p = -2;
  for (float g : {1.0f, 3.0f, -0.5f}) {
    set_grad(p, {g, 2 * g});
    adamw.step();
    r0.step(g);
    r1.step(2 * g);
  }
  expect_values(p, {r0.p, r1.p});
  // One step: p (1 - lr wd) - lr sign(g).
  Tensor q = param({1});
  AdamW one({q}, {.lr = 0.1, .weight_decay = 0.5});
  set_grad(q, {2});
  one.step();
  expect_values(q, {0.95 - 0.1});
}

TEST(OptimAdam, ParametersWithoutGradientAreSkipped) {
  Tensor a = param({1});
  Tensor b = param({2});
  Adam adam({a, b}, {.lr = 0.1});
  set_grad(a, {1});
  adam.step();
  expect_values(a, {0.9});
  expect_values(b, {2});
  optim::StateDict state = adam.state_dict();
  EXPECT_TRUE(state.contains("state.0.exp_avg"));
  EXPECT_FALSE(state.contains("state.1.exp_avg"));
  EXPECT_EQ(state.at("state.0.step").item<std::int64_t>(), 1);
  // b's first update is a first step of its own: its count starts at 1 when a's is 2.
  set_grad(a, {1});
  set_grad(b, {-1});
  adam.step();
  expect_values(b, {2.1});
  state = adam.state_dict();
  EXPECT_EQ(state.at("state.0.step").item<std::int64_t>(), 2);
  EXPECT_EQ(state.at("state.1.step").item<std::int64_t>(), 1);

  Tensor c = param({3});
  SGD sgd({a, c}, {.lr = 0.1, .momentum = 0.9});
  set_grad(a, {1});
  sgd.step();
  expect_values(c, {3});
  EXPECT_FALSE(sgd.state_dict().contains("state.1.momentum_buffer"));
  EXPECT_TRUE(sgd.state_dict().contains("state.0.momentum_buffer"));
}

TEST(OptimSgd, UpdatesAStridedParameterInPlace) {
  Tensor base = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor w = base.transpose(0, 1).requires_grad_();  // (3, 2), not contiguous
  ASSERT_FALSE(w.is_contiguous());
  SGD sgd({w}, {.lr = 0.5});
  sum(w).backward();
  sgd.step();
  expect_values(base, {0.5, 1.5, 2.5, 3.5, 4.5, 5.5});  // the view's bytes are the parameter's
}

// Runs `steps` updates with gradients that depend only on the step number.
template <class O>
void run_steps(O& optimizer, Tensor& a, Tensor& b, int first, int steps) {
  for (int s = first; s < first + steps; ++s) {
    set_grad(a, {0.5f * static_cast<float>(s) - 1, 2.0f - static_cast<float>(s)});
    if (s % 2 == 0) set_grad(b, {static_cast<float>(s)});
    else b.zero_grad();  // b skipped on odd steps
    optimizer.step();
  }
}

template <class O, class Options>
void expect_round_trip(const Options& options) {
  Tensor a = param({1, -2});
  Tensor b = param({3});
  O original({a, b}, options);
  run_steps(original, a, b, 0, 3);
  const optim::StateDict state = original.state_dict();

  Tensor a2 = a.detach().clone().requires_grad_();
  Tensor b2 = b.detach().clone().requires_grad_();
  Options other = options;
  other.lr = 123;  // the state's lr wins
  O restored({a2, b2}, other);
  restored.load_state_dict(state);
  EXPECT_EQ(restored.lr(), original.lr());
  run_steps(original, a, b, 3, 4);
  run_steps(restored, a2, b2, 3, 4);
  EXPECT_EQ(a.to_vector<float>(), a2.to_vector<float>());
  EXPECT_EQ(b.to_vector<float>(), b2.to_vector<float>());
  // The loaded buffers are copies: the state dict's tensors did not move with `restored`.
  for (const auto& [key, value] : restored.state_dict())
    if (key.ends_with("exp_avg") || key.ends_with("momentum_buffer")) {
      ASSERT_TRUE(state.contains(key)) << key;
      EXPECT_NE(value.raw_data(), state.at(key).raw_data()) << key;
    }
}

TEST(OptimStateDict, AFreshOptimizerLoadedFromTheStateContinuesIdentically) {
  expect_round_trip<SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
  expect_round_trip<Adam>(optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1});
  expect_round_trip<AdamW>(optim::AdamWOptions{.lr = 0.01, .betas = {0.8, 0.9}});
}

TEST(OptimStateDict, HoldsTheHyperparameters) {
  Tensor p = param({1});
  Adam adam({p}, {.lr = 0.01, .betas = {0.8, 0.9}, .eps = 1e-7, .weight_decay = 0.2});
  const optim::StateDict state = adam.state_dict();
  EXPECT_DOUBLE_EQ(state.at("param_groups.0.lr").item<double>(), 0.01);
  EXPECT_EQ(state.at("param_groups.0.betas").to_vector<double>(), (std::vector<double>{0.8, 0.9}));
  EXPECT_DOUBLE_EQ(state.at("param_groups.0.eps").item<double>(), 1e-7);
  EXPECT_DOUBLE_EQ(state.at("param_groups.0.weight_decay").item<double>(), 0.2);
  EXPECT_EQ(state.at("param_groups.0.params").to_vector<std::int64_t>(), (std::vector<std::int64_t>{0}));
  EXPECT_EQ(state.size(), 6u);  // and no per-parameter state before a step
}

TEST(OptimErrors, BadHyperparameters) {
  Tensor p = param({1});
  EXPECT_THROW(SGD({p}, {.lr = -0.1}), ValueError);
  EXPECT_THROW(SGD({p}, {.lr = 0.1, .momentum = -1}), ValueError);
  EXPECT_THROW(SGD({p}, {.lr = 0.1, .nesterov = true}), ValueError);
  EXPECT_THROW(SGD({p}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true}), ValueError);
  EXPECT_THROW(Adam({p}, {.lr = -1e-3}), ValueError);
  EXPECT_THROW(Adam({p}, {.betas = {1.0, 0.999}}), ValueError);
  EXPECT_THROW(AdamW({p}, {.betas = {0.9, -0.1}}), ValueError);
  EXPECT_THROW(AdamW({p}, {.eps = -1}), ValueError);
  EXPECT_THROW(AdamW({p}, {.lr = std::numeric_limits<double>::quiet_NaN()}), ValueError);
  EXPECT_THROW(SGD({}, {.lr = 0.1}), ValueError);
  EXPECT_THROW(SGD({Tensor()}, {.lr = 0.1}), ValueError);
  EXPECT_THROW(SGD({mul(p, 2)}, {.lr = 0.1}), ValueError);  // not a leaf
  EXPECT_THROW(SGD({zeros({2}, DType::I32)}, {.lr = 0.1}), TypeError);
  try {
    Adam({p}, {.lr = -1});
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(), "Adam: invalid learning rate: -1");
  }
  SGD sgd({p}, {.lr = 0.1});
  EXPECT_THROW(sgd.set_lr(-1), ValueError);
  sgd.set_lr(0.5);
  EXPECT_EQ(sgd.lr(), 0.5);
  EXPECT_EQ(sgd.options().lr, 0.5);
}

TEST(OptimErrors, GradientOfAnotherShape) {
  Tensor p = param({1, 2});
  SGD sgd({p}, {.lr = 0.1});
  p.autograd_meta()->set_grad(ones({3}));  // past Tensor::set_grad's shape check
  EXPECT_THROW(sgd.step(), ValueError);
}

TEST(OptimErrors, MismatchedStateChangesNothing) {
  Tensor a = param({1, 2});
  Tensor b = param({3});
  Adam adam({a, b}, {.lr = 0.1});
  set_grad(a, {1, 1});
  set_grad(b, {1});
  adam.step();
  const optim::StateDict good = adam.state_dict();

  auto expect_rejected = [&](optim::Optimizer& optimizer, const optim::StateDict& state, const char* why) {
    const optim::StateDict before = optimizer.state_dict();
    EXPECT_THROW(optimizer.load_state_dict(state), ValueError) << why;
    const optim::StateDict after = optimizer.state_dict();
    EXPECT_EQ(before.size(), after.size()) << why;
    for (const auto& [key, value] : before) {
      ASSERT_TRUE(after.contains(key)) << why << ": " << key;
      const Tensor& now = after.at(key);
      if (key.starts_with("state.")) {
        EXPECT_EQ(value.raw_data(), now.raw_data()) << why << ": " << key;  // the same buffer
      } else {
        ASSERT_EQ(value.numel(), now.numel()) << why << ": " << key;
        for (std::int64_t i = 0; i < value.numel(); ++i)
          EXPECT_EQ(value.value_as_double(i), now.value_as_double(i)) << why << ": " << key;
      }
    }
  };

  Adam other({a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()}, {.lr = 0.2});
  optim::StateDict wrong_shape = good;
  wrong_shape["state.1.exp_avg"] = zeros({2});
  expect_rejected(other, wrong_shape, "buffer shape");
  optim::StateDict missing = good;
  missing.erase("state.1.exp_avg_sq");
  expect_rejected(other, missing, "missing buffer");
  optim::StateDict no_step = good;
  no_step.erase("state.0.step");
  expect_rejected(other, no_step, "missing step");
  optim::StateDict bad_beta = good;
  bad_beta["param_groups.0.betas"] = from_vector(std::vector<double>{0.9, 1.5}, {2});
  expect_rejected(other, bad_beta, "beta out of range");
  optim::StateDict unknown = good;
  unknown["state.0.momentum_buffer"] = zeros({2});
  expect_rejected(other, unknown, "unknown buffer");
  optim::StateDict far = good;
  far["state.7.exp_avg"] = zeros({2});
  expect_rejected(other, far, "index past the parameters");
  EXPECT_EQ(other.lr(), 0.2);

  Adam one({a.detach().clone().requires_grad_()}, {});
  expect_rejected(one, good, "two parameters' state for one");
  SGD sgd({a, b}, {.lr = 0.1, .momentum = 0.9});
  expect_rejected(sgd, good, "Adam's state for SGD");
  AdamW adamw({a, b}, {});
  expect_rejected(adamw, good, "Adam's state for AdamW");
  adam.load_state_dict(good);  // and the good one loads
}

TEST(OptimParamGroups, EachGroupStepsWithItsOwnOptions) {
  // Two groups of AdamW: weight decay on the first only, and a learning rate per group.
  Tensor decayed = param({1.0f}), plain = param({1.0f});
  AdamW opt({{{decayed}, {.lr = 0.1, .weight_decay = 0.5}}, {{plain}, {.lr = 0.2, .weight_decay = 0.0}}});
  ASSERT_EQ(opt.num_groups(), 2u);
  set_grad(decayed, {0.5f});
  set_grad(plain, {0.5f});
  opt.step();
  // First step of Adam moves each parameter by lr (m / sqrt(v) = 1); AdamW first decays by lr * wd.
  expect_values(decayed, {1.0 * (1 - 0.1 * 0.5) - 0.1}, 1e-5);
  expect_values(plain, {1.0 - 0.2}, 1e-5);
  opt.set_group_lr(1, 0.0);
  set_grad(plain, {0.5f});
  opt.step();
  expect_values(plain, {0.8}, 1e-6);
  const optim::StateDict state = opt.state_dict();
  EXPECT_EQ(state.at("param_groups.1.params").to_vector<std::int64_t>(), (std::vector<std::int64_t>{1}));
  EXPECT_DOUBLE_EQ(state.at("param_groups.0.weight_decay").item<double>(), 0.5);
  EXPECT_DOUBLE_EQ(state.at("param_groups.1.lr").item<double>(), 0.0);
}

TEST(OptimParamGroups, AParameterInTwoGroupsIsRefused) {
  Tensor p = param({1.0f});
  EXPECT_THROW(SGD({{{p}, {.lr = 0.1}}, {{p}, {.lr = 0.2}}}), ValueError);
}

TEST(OptimClipGradNorm, ScalesToMaxNormAndReturnsTheTotal) {
  Tensor a = param({0, 0});
  Tensor b = param({0});
  Tensor c = param({0});  // no gradient: ignored
  set_grad(a, {3, 4});
  set_grad(b, {12});
  EXPECT_NEAR(optim::clip_grad_norm_({a, b, c}, 6.5), 13.0, 1e-6);
  const double scale = 6.5 / (13.0 + 1e-6);
  expect_values(a.grad(), {3 * scale, 4 * scale});
  expect_values(b.grad(), {12 * scale});
  EXPECT_FALSE(c.grad().defined());

  // Under the limit nothing changes; the infinity norm is the largest magnitude.
  set_grad(a, {3, -4});
  set_grad(b, {-12});
  EXPECT_NEAR(optim::clip_grad_norm_({a, b}, 100, std::numeric_limits<double>::infinity()), 12.0, 1e-9);
  expect_values(a.grad(), {3, -4});
  EXPECT_NEAR(optim::clip_grad_norm_({a, b}, 100, 1.0), 19.0, 1e-9);
  EXPECT_NEAR(optim::clip_grad_norm_({a, b}, 100, 3.0), std::cbrt(27.0 + 64 + 1728), 1e-6);

  EXPECT_EQ(optim::clip_grad_norm_({c}, 1.0), 0.0);
  EXPECT_THROW(optim::clip_grad_norm_({a}, 1.0, 0.0), ValueError);
  set_grad(b, {std::numeric_limits<float>::infinity()});
  EXPECT_THROW(optim::clip_grad_norm_({a, b}, 1.0, 2.0, true), ValueError);
  expect_values(a.grad(), {3, -4});  // left as they were
}

TEST(OptimSpeed, LargeParameterUpdatesInPlace) {
  Tensor p = zeros({1 << 20}).requires_grad_();
  const std::byte* bytes = p.raw_data();
  AdamW adamw({p}, {.lr = 1e-3});
  sum(p).backward();
  for (int i = 0; i < 5; ++i) adamw.step();
  EXPECT_EQ(p.raw_data(), bytes);
  EXPECT_NEAR(p.to_vector<float>()[12345], -5e-3, 1e-6);
}

}  // namespace
}  // namespace kael
