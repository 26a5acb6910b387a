// torch.optim.AdamW and Adam on F32 run the training step's AdamW kernel where their arithmetic
// is its arithmetic: a few steps of the optimizer give kernels::adamw_update's bits, on a size
// that leaves a ragged tail past every vector width and thread split. clip_grad_norm_'s F32
// 2-norm is the training step's gradient norm (kernels::sum_of_squares).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "kael/optim/adam.hpp"
#include "kael/optim/clip_grad.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "kernels/training.hpp"

namespace kael {
namespace {

std::vector<float> random_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> out(n);
  for (float& x : out) x = normal(rng);
  return out;
}

// Gives p the gradient c (the gradient of sum(p * c), exactly c), dropping any earlier one.
void set_grad(Tensor& p, const std::vector<float>& c) {
  p.zero_grad();
  sum(mul(p, from_vector(c, p.shape()))).backward();
}

// Three steps of the optimizer against three calls of the kernel with the scalars built as the
// training step builds them (torch rounds each Python float to the tensor's float).
void expect_kernel_bits(bool decoupled, double weight_decay) {
  constexpr std::int64_t n = 70001;  // odd and past the kernels' per-thread minimum
  const double lr = 3e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  std::vector<float> expected = random_values(n, 1);
  Tensor p = from_vector(expected, {n}).requires_grad_();
  std::vector<float> m(n, 0.0f), v(n, 0.0f);
  optim::AdamOptions options{.lr = lr, .betas = {beta1, beta2}, .eps = eps, .weight_decay = weight_decay};
  std::unique_ptr<optim::Adam> opt =
      decoupled ? std::unique_ptr<optim::Adam>(std::make_unique<optim::AdamW>(
                      std::vector<Tensor>{p}, optim::AdamWOptions{lr, {beta1, beta2}, eps, weight_decay}))
                : std::make_unique<optim::Adam>(std::vector<Tensor>{p}, options);
  for (int t = 1; t <= 3; ++t) {
    const std::vector<float> g = random_values(n, 10 + t);
    set_grad(p, g);
    opt->step();
    kernels::AdamWScalars s;
    s.decay = decoupled && weight_decay != 0 ? static_cast<float>(1.0 - lr * weight_decay) : 1.0f;
    s.one_minus_beta1 = static_cast<float>(1.0 - beta1);
    s.beta2 = static_cast<float>(beta2);
    s.one_minus_beta2 = static_cast<float>(1.0 - beta2);
    s.neg_step_size = static_cast<float>(-(lr / (1.0 - std::pow(beta1, t))));
    s.bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, t)));
    s.eps = static_cast<float>(eps);
    kernels::adamw_update(expected.data(), m.data(), v.data(), g.data(), n, s);
    const std::vector<float> got = p.to_vector<float>();
    std::int64_t differing = 0;
    for (std::size_t i = 0; i < got.size(); ++i) differing += got[i] != expected[i];
    EXPECT_EQ(differing, 0) << "step " << t;
  }
}

TEST(OptimAdamKernel, AdamWStepIsTheKernelsBits) { expect_kernel_bits(true, 0.1); }

TEST(OptimAdamKernel, AdamWithoutDecayIsTheKernelsBits) { expect_kernel_bits(false, 0.0); }

TEST(OptimClipGradKernel, F32TwoNormIsTheTrainingStepsNorm) {
  constexpr std::int64_t n = 300007;  // several of the kernel's blocks and a ragged tail
  const std::vector<float> g = random_values(n, 5);
  Tensor p = from_vector(std::vector<float>(n, 0.0f), {n}).requires_grad_();
  set_grad(p, g);
  // One gradient: the norm of the norms is that norm (sqrt(x * x) is x, correctly rounded).
  EXPECT_EQ(optim::clip_grad_norm_({p}, 1e30), std::sqrt(kernels::sum_of_squares(g.data(), n)));
}

}  // namespace
}  // namespace kael
