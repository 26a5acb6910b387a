// kael::optim::Adadelta and RMSprop: two steps against the formulas worked by hand in double,
// their state dict's layout and round trip, and their argument errors. The same updates against
// torch.optim are in tests/python/test_optim_vs_torch.py.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kael/core/error.hpp"
#include "kael/optim/adadelta.hpp"
#include "kael/optim/rmsprop.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"

namespace kael {
namespace {

void set_grad(Tensor& p, const std::vector<float>& c) {
  p.zero_grad();
  sum(mul(p, from_vector(c, p.shape()))).backward();
}

TEST(OptimAdadelta, TwoStepsFollowTheFormula) {
  Tensor p = from_vector(std::vector<float>{1.0f, -2.0f}, {2}).requires_grad_();
  optim::Adadelta opt({p}, {.lr = 0.5, .rho = 0.8, .eps = 1e-3, .weight_decay = 0.1});
  std::vector<double> value{1.0, -2.0}, square{0, 0}, acc{0, 0};
  const std::vector<std::vector<float>> grads{{0.3f, -0.7f}, {-0.2f, 0.4f}};
  for (const auto& g : grads) {
    set_grad(p, g);
    opt.step();
    for (std::size_t i = 0; i < 2; ++i) {
      const double d = g[i] + 0.1 * value[i];
      square[i] = 0.8 * square[i] + 0.2 * d * d;
      const double delta = std::sqrt(acc[i] + 1e-3) / std::sqrt(square[i] + 1e-3) * d;
      acc[i] = 0.8 * acc[i] + 0.2 * delta * delta;
      value[i] -= 0.5 * delta;
    }
    const auto got = p.to_vector<float>();
    for (std::size_t i = 0; i < 2; ++i) EXPECT_NEAR(got[i], value[i], 1e-6);
  }
  const auto state = opt.state_dict();
  EXPECT_EQ(state.at("state.0.step").item<std::int64_t>(), 2);
  EXPECT_NEAR(state.at("state.0.acc_delta").to_vector<float>()[1], acc[1], 1e-7);
  EXPECT_NEAR(state.at("param_groups.0.rho").item<double>(), 0.8, 1e-12);

  Tensor q = from_vector(std::vector<float>{1.0f, -2.0f}, {2}).requires_grad_();
  optim::Adadelta restored({q}, {});
  restored.load_state_dict(state);
  EXPECT_EQ(restored.options().rho, 0.8);
  EXPECT_EQ(restored.lr(), 0.5);
}

TEST(OptimRmsprop, CenteredWithMomentumFollowsTheFormula) {
  Tensor p = from_vector(std::vector<float>{0.5f}, {1}).requires_grad_();
  optim::RMSprop opt({p}, {.lr = 0.01, .alpha = 0.9, .eps = 1e-6, .weight_decay = 0.0, .momentum = 0.5, .centered = true});
  double value = 0.5, square = 0, grad_avg = 0, buf = 0;
  for (float g : {0.4f, -0.1f, 0.3f}) {
    set_grad(p, {g});
    opt.step();
    square = 0.9 * square + 0.1 * g * g;
    grad_avg += 0.1 * (g - grad_avg);
    const double avg = std::sqrt(square - grad_avg * grad_avg) + 1e-6;
    buf = 0.5 * buf + g / avg;
    value -= 0.01 * buf;
    EXPECT_NEAR(p.to_vector<float>()[0], value, 1e-6);
  }
  EXPECT_EQ(opt.state_dict().count("state.0.grad_avg"), 1u);
}

TEST(OptimAdadeltaRmsprop, BadOptionsAreValueErrors) {
  Tensor p = zeros({2}).requires_grad_();
  EXPECT_THROW(optim::Adadelta({p}, {.rho = 1.5}), ValueError);
  EXPECT_THROW(optim::Adadelta({p}, {.lr = -1}), ValueError);
  EXPECT_THROW(optim::RMSprop({p}, {.alpha = -0.1}), ValueError);
  EXPECT_THROW(optim::RMSprop({p}, {.momentum = -1}), ValueError);
}

}  // namespace
}  // namespace kael
