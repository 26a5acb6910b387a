// The training kernels (kernels/training.hpp) on every instruction set against their plain
// references, on ragged sizes around the vector width (16) and the sum's blocks (2^16), with
// 1 and several threads; and the bits that must not depend on the set.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/dispatch/kernel_table.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/training.hpp"
#include "kernels_testing.hpp"

using namespace kael::kernels;

namespace {

using test_util::max_error;
using test_util::random_vector;

const std::int64_t kRagged[] = {0, 1, 7, 15, 16, 17, 31, 33, 100, 1000};

using TrainingKernels = test_util::OnEveryIsa;

AdamWScalars scalars_at_step(int t, float decay) {
  const double lr = 1e-3, beta1 = 0.9, beta2 = 0.95;
  AdamWScalars s;
  s.decay = decay;
  s.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  s.beta2 = static_cast<float>(beta2);
  s.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  s.neg_step_size = static_cast<float>(-(lr / (1.0 - std::pow(beta1, t))));
  s.bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, t)));
  s.eps = 1e-8f;
  return s;
}

}  // namespace

TEST_P(TrainingKernels, GeluBackwardMatchesReference) {
  for (std::int64_t n : kRagged) {
    // Inputs up to +-12: both tails of the tanh, where the derivative goes to 0 and 1.
    const auto x = random_vector(n, 1, 4.0f), dout = random_vector(n, 2);
    std::vector<float> fast(n), slow(n), in_place = dout;
    gelu_backward(fast.data(), x.data(), dout.data(), n);
    ref::gelu_backward(slow.data(), x.data(), dout.data(), n);
    EXPECT_LT(max_error(fast, slow), 2e-6) << "n=" << n;
    gelu_backward(in_place.data(), x.data(), in_place.data(), n);
    EXPECT_EQ(in_place, fast) << "dinp may be dout";
  }
}

TEST_P(TrainingKernels, AdamWMatchesReferenceAndThePortableBits) {
  for (std::int64_t n : kRagged)
    for (float decay : {1.0f, 0.999f}) {
      auto param = random_vector(n, 3), m = random_vector(n, 4, 0.01f), v = random_vector(n, 5, 0.001f);
      for (float& x : v) x = x * x;  // a second moment is never negative
      const auto grad = random_vector(n, 6, 0.1f);
      auto want_param = param, want_m = m, want_v = v;
      auto portable_param = param, portable_m = m, portable_v = v;
      const AdamWScalars s = scalars_at_step(3, decay);
      adamw_update(param.data(), m.data(), v.data(), grad.data(), n, s);
      ref::adamw_update(want_param.data(), want_m.data(), want_v.data(), grad.data(), n, s);
      EXPECT_LT(max_error(param, want_param), 1e-6) << "n=" << n;
      EXPECT_LT(max_error(m, want_m), 1e-6);
      EXPECT_LT(max_error(v, want_v), 1e-6);
      // Every operation is a rounded IEEE one in a fixed order: the same bits on every set.
      kernels_for(Isa::scalar).adamw_update(portable_param.data(), portable_m.data(), portable_v.data(), grad.data(),
                                            n, s);
      EXPECT_EQ(param, portable_param) << "n=" << n << " decay=" << decay;
      EXPECT_EQ(m, portable_m);
      EXPECT_EQ(v, portable_v);
    }
}

TEST_P(TrainingKernels, AdamWGradScaleEqualsScalingTheGradientsFirst) {
  // The clipping folded into the update: the same bits as clip_grad_norm's pass (g *= scale)
  // followed by an update with scale 1.
  for (std::int64_t n : kRagged) {
    auto param = random_vector(n, 3), m = random_vector(n, 4, 0.01f), v = random_vector(n, 5, 0.001f);
    for (float& x : v) x = x * x;
    auto grad = random_vector(n, 6, 0.1f);
    auto want_param = param, want_m = m, want_v = v;
    AdamWScalars s = scalars_at_step(3, 0.999f);
    s.grad_scale = 0.3712f;
    adamw_update(param.data(), m.data(), v.data(), grad.data(), n, s);
    for (float& g : grad) g *= s.grad_scale;
    s.grad_scale = 1.0f;
    adamw_update(want_param.data(), want_m.data(), want_v.data(), grad.data(), n, s);
    EXPECT_EQ(param, want_param) << "n=" << n;
    EXPECT_EQ(m, want_m);
    EXPECT_EQ(v, want_v);
  }
}

TEST_P(TrainingKernels, SumOfSquaresMatchesReferenceWithTheSameBitsOnEverySet) {
  for (std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{17}, std::int64_t{1000},
                         (std::int64_t{1} << 16) - 1, (std::int64_t{1} << 16) + 17, std::int64_t{3} << 16}) {
    const auto x = random_vector(n, 7);
    const double fast = sum_of_squares(x.data(), n), slow = ref::sum_of_squares(x.data(), n);
    EXPECT_LE(std::abs(fast - slow), 1e-12 * (1.0 + slow)) << "n=" << n;
    // One block through the portable table gives the same bits as this set's.
    const std::int64_t block = std::min<std::int64_t>(n, 1 << 16);
    EXPECT_EQ(active_kernels().sum_of_squares(x.data(), block), kernels_for(Isa::scalar).sum_of_squares(x.data(), block))
        << "n=" << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, TrainingKernels, test_util::every_isa_and_threads(), test_util::isa_threads_name);
