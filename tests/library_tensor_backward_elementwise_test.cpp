// The named backward rules of the elementwise ops and reductions (src/tensor/backward.hpp, the
// section for elementwise.cpp and reduce.cpp), each called alone on what its forward saves,
// against central finite differences of the op's forward in F64, on broadcast and ragged shapes.
// Where the derivative has a kink (a tie of maximum, a bound of clamp, a max with equal values)
// the rule's convention is checked exactly. The torch comparisons of the same ops through
// autograd are tests/python/test_tensor_vs_torch.py and test_tensor_ops_vs_torch.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "tensor/backward.hpp"
#include "tensor_backward_testing.hpp"

namespace kael {
namespace {

using tensor_backward_testing::expect_close;
using tensor_backward_testing::numeric_gradient;
namespace rules = tensor_detail;

// Values at least `margin` away from 0, with both signs: a divisor, or a base of a negative power.
Tensor away_from_zero(Shape shape, double margin) {
  const Tensor x = randn(std::move(shape), DType::F64);
  return add(x, mul(sub(gt(x, 0).to(DType::F64), lt(x, 0).to(DType::F64)), margin));
}

TEST(TensorBackwardElementwiseRules, AddAndSubSumBackToBroadcastShapes) {
  manual_seed(11);
  const Tensor a = randn({3, 1, 4}, DType::F64), b = randn({5, 1}, DType::F64), g = randn({3, 5, 4}, DType::F64);
  for (double alpha : {1.0, -1.0, 2.5}) {
    const auto grads = rules::add_backward(g, a.shape(), b.shape(), alpha);
    ASSERT_EQ(grads.size(), 2u);
    const std::string what = "alpha " + std::to_string(alpha);
    expect_close(grads[0], numeric_gradient([&](const Tensor& v) { return add(v, b, alpha); }, a, g), 1e-7,
                 what + " da");
    expect_close(grads[1], numeric_gradient([&](const Tensor& v) { return add(a, v, alpha); }, b, g), 1e-7,
                 what + " db");
  }
  // sub is add with alpha negated.
  const auto grads = rules::add_backward(g, a.shape(), b.shape(), -1.0);
  expect_close(grads[1], numeric_gradient([&](const Tensor& v) { return sub(a, v); }, b, g), 1e-7, "sub db");
}

TEST(TensorBackwardElementwiseRules, MulSumsBackAndReadsOnlyTheOtherOperand) {
  manual_seed(12);
  const Tensor a = randn({4, 1, 3}, DType::F64), b = randn({5, 1}, DType::F64), g = randn({4, 5, 3}, DType::F64);
  const auto grads = rules::mul_backward(g, a, b, a.shape(), b.shape(), true, true);
  ASSERT_EQ(grads.size(), 2u);
  expect_close(grads[0], numeric_gradient([&](const Tensor& v) { return mul(v, b); }, a, g), 1e-7, "da");
  expect_close(grads[1], numeric_gradient([&](const Tensor& v) { return mul(a, v); }, b, g), 1e-7, "db");
  // As the forward saves: only b for da, only a for db.
  const auto only_a = rules::mul_backward(g, Tensor(), b, a.shape(), b.shape(), true, false);
  expect_close(only_a[0], grads[0], 0.0, "da alone");
  EXPECT_FALSE(only_a[1].defined());
  const auto only_b = rules::mul_backward(g, a, Tensor(), a.shape(), b.shape(), false, true);
  EXPECT_FALSE(only_b[0].defined());
  expect_close(only_b[1], grads[1], 0.0, "db alone");
}

TEST(TensorBackwardElementwiseRules, Div) {
  manual_seed(13);
  const Tensor a = randn({2, 3, 1}, DType::F64), b = away_from_zero({3, 4}, 0.5), g = randn({2, 3, 4}, DType::F64);
  const auto grads = rules::div_backward(g, a, b, a.shape(), true, true);
  ASSERT_EQ(grads.size(), 2u);
  expect_close(grads[0], numeric_gradient([&](const Tensor& v) { return div(v, b); }, a, g), 1e-6, "da");
  expect_close(grads[1], numeric_gradient([&](const Tensor& v) { return div(a, v); }, b, g), 1e-6, "db");
  const auto only_a = rules::div_backward(g, Tensor(), b, a.shape(), true, false);
  expect_close(only_a[0], grads[0], 0.0, "da alone");
  EXPECT_FALSE(only_a[1].defined());
}

TEST(TensorBackwardElementwiseRules, PowWithAScalarExponentOnNegativeBases) {
  manual_seed(14);
  const Tensor x = away_from_zero({5, 3}, 0.3), g = randn({5, 3}, DType::F64);
  // Integer exponents on bases of both signs, and 0 (whose rule is zeros).
  for (double e : {0.0, 1.0, 2.0, 3.0, -1.0, -2.0}) {
    const Tensor want = numeric_gradient([&](const Tensor& v) { return pow(v, e); }, x, g);
    expect_close(rules::pow_backward(g, x, e), want, 1e-6, "exponent " + std::to_string(e));
  }
  const Tensor positive = add(rand({5, 3}, DType::F64), 0.5);
  for (double e : {0.5, -1.5, 2.7}) {
    const Tensor want = numeric_gradient([&](const Tensor& v) { return pow(v, e); }, positive, g);
    expect_close(rules::pow_backward(g, positive, e), want, 1e-6, "positive bases, exponent " + std::to_string(e));
  }
  EXPECT_EQ(rules::pow_backward(g, x, 0.0).dtype(), DType::F64);
}

TEST(TensorBackwardElementwiseRules, PowWithATensorExponent) {
  manual_seed(15);
  const Tensor a = add(rand({3, 4}, DType::F64), 0.5), e = randn({4}, DType::F64), g = randn({3, 4}, DType::F64);
  const auto grads = rules::pow_backward(g, a, e, pow(a, e), true, true);
  ASSERT_EQ(grads.size(), 2u);
  expect_close(grads[0], numeric_gradient([&](const Tensor& v) { return pow(v, e); }, a, g), 1e-6, "da");
  expect_close(grads[1], numeric_gradient([&](const Tensor& v) { return pow(a, v); }, e, g), 1e-6, "dexponent");
  // Negative bases with integer exponents: a's gradient only (the exponent's is log of a negative).
  const Tensor base = away_from_zero({3, 4}, 0.3), integers = from_vector(std::vector<double>{2, 3, -1, 1}, {4});
  const auto only_a = rules::pow_backward(g, base, integers, Tensor(), true, false);
  expect_close(only_a[0], numeric_gradient([&](const Tensor& v) { return pow(v, integers); }, base, g), 1e-6,
               "negative bases da");
  EXPECT_FALSE(only_a[1].defined());
}

TEST(TensorBackwardElementwiseRules, MaximumAndMinimumSplitTiesEvenly) {
  manual_seed(16);
  // b broadcast over a's rows, with ties in some columns: central differences at a tie give
  // each side 1/2, the split PyTorch's maximum and minimum make.
  const Tensor a = randn({3, 4}, DType::F64);
  const Tensor b = from_vector(std::vector<double>{a.value_as_double(0), 0.1, a.value_as_double(6), -0.2}, {4});
  const Tensor g = randn({3, 4}, DType::F64);
  for (bool larger : {true, false}) {
    const auto op = [larger](const Tensor& x, const Tensor& y) { return larger ? maximum(x, y) : minimum(x, y); };
    const auto grads = larger ? rules::maximum_backward(g, a, b) : rules::minimum_backward(g, a, b);
    ASSERT_EQ(grads.size(), 2u);
    const std::string what = larger ? "maximum" : "minimum";
    expect_close(grads[0], numeric_gradient([&](const Tensor& v) { return op(v, b); }, a, g), 1e-7, what + " da");
    expect_close(grads[1], numeric_gradient([&](const Tensor& v) { return op(a, v); }, b, g), 1e-7, what + " db");
    EXPECT_EQ(grads[0].value_as_double(0), 0.5 * g.value_as_double(0)) << what << " tie";
  }
}

TEST(TensorBackwardElementwiseRules, NegAndAbs) {
  manual_seed(17);
  const Tensor g = randn({4, 5}, DType::F64);
  const Tensor x = from_vector(std::vector<double>{0.0, -0.0, 1.5, -2.0, 0.3}, {5}).expand({4, 5}).contiguous();
  expect_close(rules::neg_backward(g), numeric_gradient([](const Tensor& v) { return neg(v); }, x, g), 1e-7, "neg");
  // At 0 central differences give 0, the rule's (and torch's) sign(0).
  expect_close(rules::abs_backward(g, x), numeric_gradient([](const Tensor& v) { return abs(v); }, x, g), 1e-7, "abs");
  EXPECT_EQ(rules::abs_backward(g, x).value_as_double(0), 0.0);
}

TEST(TensorBackwardElementwiseRules, UnaryFunctions) {
  manual_seed(18);
  using Rule = Tensor (*)(const Tensor&, const Tensor&, const Tensor&);
  struct Case {
    const char* name;
    Tensor (*op)(const Tensor&);
    Rule rule;
    bool positive;  // a domain of positive inputs only
  };
  const Case cases[] = {
      {"exp", exp, rules::exp_backward, false},    {"log", log, rules::log_backward, true},
      {"sqrt", sqrt, rules::sqrt_backward, true},  {"rsqrt", rsqrt, rules::rsqrt_backward, true},
      {"tanh", tanh, rules::tanh_backward, false}, {"sin", sin, rules::sin_backward, false},
      {"cos", cos, rules::cos_backward, false},    {"sigmoid", sigmoid, rules::sigmoid_backward, false},
  };
  const Tensor g = randn({3, 7}, DType::F64);
  const Tensor anywhere = mul(randn({3, 7}, DType::F64), 2.0), positive = add(mul(rand({3, 7}, DType::F64), 3.0), 0.2);
  for (const Case& c : cases) {
    const Tensor& x = c.positive ? positive : anywhere;
    expect_close(c.rule(g, x, c.op(x)), numeric_gradient(c.op, x, g), 1e-6, c.name);
    // The recorded node calls the same rule: a transposed input's gradient through autograd.
    const Tensor leaf = x.T().detach().requires_grad_();
    c.op(leaf).backward(g.T());
    expect_close(leaf.grad(), c.rule(g, x, c.op(x)).T(), 0.0, std::string(c.name) + " recorded");
  }
}

TEST(TensorBackwardElementwiseRules, WhereRoutesEachSideAndSumsBack) {
  manual_seed(19);
  const Tensor cond = gt(randn({3, 4}, DType::F64), 0);
  const Tensor a = randn({3, 1}, DType::F64), b = randn({4}, DType::F64), g = randn({3, 4}, DType::F64);
  const auto grads = rules::where_backward(g, cond, a.shape(), b.shape());
  ASSERT_EQ(grads.size(), 2u);
  expect_close(grads[0], numeric_gradient([&](const Tensor& v) { return where(cond, v, b); }, a, g), 1e-7, "da");
  expect_close(grads[1], numeric_gradient([&](const Tensor& v) { return where(cond, a, v); }, b, g), 1e-7, "db");
}

TEST(TensorBackwardElementwiseRules, ClampGivesZeroAtABoundHitExactlyAndOnNaN) {
  manual_seed(20);
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const Tensor g = randn({11}, DType::F64);
  // -0.5 and 0.7 are the bounds exactly; the others are inside or outside, NaN or infinite.
  const Tensor x = from_vector(std::vector<double>{-0.5, 0.7, -0.9, 1.3, 0.1, -0.2, 0.69, -0.51, nan, inf, -inf}, {11});
  struct Bounds {
    std::optional<Scalar> min, max;
  };
  for (const Bounds& b : {Bounds{-0.5, 0.7}, Bounds{-0.5, std::nullopt}, Bounds{std::nullopt, 0.7}}) {
    const std::optional<double> lo = b.min ? std::optional<double>(b.min->value) : std::nullopt;
    const std::optional<double> hi = b.max ? std::optional<double>(b.max->value) : std::nullopt;
    const Tensor got = rules::clamp_backward(g, x, lo, hi);
    for (std::int64_t i = 0; i < 8; ++i) {  // the finite values: central differences away from the kink
      const double v = x.value_as_double(i);
      if ((lo && v == *lo) || (hi && v == *hi)) {  // the kink: 0, as torch (central differences give g / 2)
        EXPECT_EQ(got.value_as_double(i), 0.0) << "bound " << i;
        continue;
      }
      const Tensor numeric = numeric_gradient([&](const Tensor& v) { return clamp(v, b.min, b.max); }, x.narrow(0, 0, 8), g.narrow(0, 0, 8));
      EXPECT_NEAR(got.value_as_double(i), numeric.value_as_double(i), 1e-7) << i;
    }
    EXPECT_EQ(got.value_as_double(8), 0.0) << "NaN";
    // An infinite x is inside the bounds that are not given: +inf passes g with only a min.
    EXPECT_EQ(got.value_as_double(9), !hi ? g.value_as_double(9) : 0.0) << "+inf";
    EXPECT_EQ(got.value_as_double(10), !lo ? g.value_as_double(10) : 0.0) << "-inf";
  }
}

TEST(TensorBackwardElementwiseRules, FloorDivideHasNoDerivative) {
  EXPECT_THROW(rules::floor_divide_backward(ones({3}, DType::F64)), ValueError);
  const Tensor a = randn({3}, DType::F64).requires_grad_();
  EXPECT_THROW(sum(floor_divide(a, 2.0)).backward(), ValueError);
}

TEST(TensorBackwardElementwiseRules, Remainder) {
  manual_seed(21);
  const Tensor a = mul(randn({4, 3}, DType::F64), 5.0), b = add(rand({3}, DType::F64), 1.5),
               g = randn({4, 3}, DType::F64);
  const auto grads = rules::remainder_backward(g, a, b);
  ASSERT_EQ(grads.size(), 2u);
  expect_close(grads[0], numeric_gradient([&](const Tensor& v) { return remainder(v, b); }, a, g), 1e-6, "da");
  expect_close(grads[1], numeric_gradient([&](const Tensor& v) { return remainder(a, v); }, b, g), 1e-6, "db");
}

TEST(TensorBackwardElementwiseRules, SumOverSomeDims) {
  manual_seed(22);
  const Tensor x = randn({3, 4, 5}, DType::F64);
  for (bool keepdim : {false, true}) {
    for (const std::vector<int>& dims : {std::vector<int>{0, 2}, std::vector<int>{1}, std::vector<int>{}}) {
      const Tensor y = sum(x, dims, keepdim);
      const Tensor g = randn(y.shape(), DType::F64);
      Shape kept = x.shape();
      for (std::size_t d = 0; d < kept.size(); ++d)
        if (dims.empty() || std::find(dims.begin(), dims.end(), static_cast<int>(d)) != dims.end()) kept[d] = 1;
      const Tensor got = rules::sum_backward(g, x.shape(), kept);
      EXPECT_TRUE(got.is_contiguous());
      expect_close(got, numeric_gradient([&](const Tensor& v) { return sum(v, dims, keepdim); }, x, g), 1e-7,
                   "dims " + std::to_string(dims.size()) + (keepdim ? " keepdim" : ""));
    }
  }
}

TEST(TensorBackwardElementwiseRules, StdOfTheVarianceAndThroughItsCorrection) {
  manual_seed(23);
  // The rule is the node sqrt(v): against differences of sqrt, and 0 where s is 0.
  const Tensor v = add(rand({3, 4}, DType::F64), 0.1), g = randn({3, 4}, DType::F64);
  expect_close(rules::std_backward(g, sqrt(v)), numeric_gradient([](const Tensor& t) { return sqrt(t); }, v, g), 1e-6,
               "sqrt of v");
  const Tensor zero_s = rules::std_backward(g, zeros({3, 4}, DType::F64));
  for (std::int64_t i = 0; i < zero_s.numel(); ++i) EXPECT_EQ(zero_s.value_as_double(i), 0.0);
  // The whole std through autograd (its rule after var's ops), with each correction.
  const Tensor x = randn({4, 6}, DType::F64);
  for (int correction : {0, 1, 2}) {
    for (bool keepdim : {false, true}) {
      const Tensor leaf = x.detach().requires_grad_();
      const Tensor s = kael::std(leaf, {1}, keepdim, correction);
      const Tensor gs = randn(s.shape(), DType::F64);
      s.backward(gs);
      expect_close(leaf.grad(),
                   numeric_gradient([&](const Tensor& t) { return kael::std(t, {1}, keepdim, correction); }, x, gs),
                   1e-6, "correction " + std::to_string(correction));
    }
  }
  // A constant row: std 0 gives 0, not NaN.
  const Tensor flat = full({2, 5}, 3.0, DType::F64).requires_grad_();
  kael::std(flat, {1}).backward(ones({2}, DType::F64));
  for (std::int64_t i = 0; i < flat.numel(); ++i) EXPECT_EQ(flat.grad().value_as_double(i), 0.0);
}

TEST(TensorBackwardElementwiseRules, MaxAndMinScatterToTheReturnedIndex) {
  manual_seed(24);
  const Tensor x = randn({3, 5, 4}, DType::F64);
  for (bool largest : {true, false}) {
    for (int dim : {0, 1, 2, -1}) {
      for (bool keepdim : {false, true}) {
        const auto reduce = [&](const Tensor& v) { return largest ? max(v, dim, keepdim) : min(v, dim, keepdim); };
        const auto [values, indices] = reduce(x);
        const Tensor g = randn(values.shape(), DType::F64);
        const std::string what =
            std::string(largest ? "max" : "min") + " dim " + std::to_string(dim) + (keepdim ? " keepdim" : "");
        expect_close(rules::value_selecting_reduction_backward(g, dim, indices, x.shape(), keepdim),
                     numeric_gradient([&](const Tensor& v) { return reduce(v).first; }, x, g), 1e-7, what);
      }
    }
  }
  // Ties: the whole gradient goes to the index the op returned (the first), as the recorded node.
  const Tensor tied = from_vector(std::vector<double>{1.0, 3.0, 3.0, 2.0, 5.0, 5.0}, {2, 3});
  const auto [values, indices] = max(tied, 1);
  EXPECT_EQ(indices.value_as_double(0), 1.0);
  EXPECT_EQ(indices.value_as_double(1), 1.0);
  const Tensor g = from_vector(std::vector<double>{0.25, 4.0}, {2});
  const Tensor got = rules::value_selecting_reduction_backward(g, 1, indices, tied.shape(), false);
  const std::vector<double> expected{0.0, 0.25, 0.0, 0.0, 4.0, 0.0};
  for (std::int64_t i = 0; i < 6; ++i) EXPECT_EQ(got.value_as_double(i), expected[static_cast<std::size_t>(i)]) << i;
  const Tensor leaf = tied.detach().requires_grad_();
  max(leaf, 1).first.backward(g);
  expect_close(leaf.grad(), got, 0.0, "recorded");
  // The whole-tensor max: the flat tensor's dim 0, and a 0-D input.
  const Tensor whole = from_vector(std::vector<double>{1.0, 7.0, 3.0}, {3});
  const Tensor flat_grad =
      rules::value_selecting_reduction_backward(full({}, 2.0, DType::F64), 0, argmax(whole), whole.shape(), false);
  EXPECT_EQ(flat_grad.value_as_double(1), 2.0);
  EXPECT_EQ(flat_grad.value_as_double(0), 0.0);
  const Tensor scalar_grad =
      rules::value_selecting_reduction_backward(full({}, 2.0, DType::F64), 0, zeros({}, DType::I64), Shape{}, false);
  EXPECT_EQ(scalar_grad.shape(), Shape{});
  EXPECT_EQ(scalar_grad.value_as_double(0), 2.0);
}

TEST(TensorBackwardElementwiseRules, WholeTensorMaxAndMinShareATieEvenly) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = from_vector(std::vector<double>{3.0, 1.0, 3.0, -2.0, 3.0, -2.0}, {2, 3});
  const Tensor g = full({}, 1.5, DType::F64);
  const Tensor got = rules::evenly_distribute_backward(g, x, max(x));
  const std::vector<double> expected{0.5, 0.0, 0.5, 0.0, 0.5, 0.0};
  for (std::int64_t i = 0; i < 6; ++i) EXPECT_EQ(got.value_as_double(i), expected[static_cast<std::size_t>(i)]) << i;
  EXPECT_EQ(got.shape(), x.shape());
  // Through the recorded node, max and min alike.
  const Tensor leaf = x.detach().requires_grad_();
  min(leaf).backward(g);
  const std::vector<double> min_expected{0.0, 0.0, 0.0, 0.75, 0.0, 0.75};
  for (std::int64_t i = 0; i < 6; ++i)
    EXPECT_EQ(leaf.grad().value_as_double(i), min_expected[static_cast<std::size_t>(i)]) << i;
  // A NaN maximum: its gradient goes to the NaNs.
  const Tensor with_nan = from_vector(std::vector<double>{nan, 5.0, nan}, {3});
  const Tensor nan_grad = rules::evenly_distribute_backward(g, with_nan, max(with_nan));
  EXPECT_EQ(nan_grad.value_as_double(0), 0.75);
  EXPECT_EQ(nan_grad.value_as_double(1), 0.0);
  EXPECT_EQ(nan_grad.value_as_double(2), 0.75);
  EXPECT_THROW(rules::evenly_distribute_backward(ones({2}, DType::F64), x, max(x)), ValueError);
}

TEST(TensorBackwardElementwiseRules, ValueSelectingRefusesIndicesThatDoNotFit) {
  const Tensor g = ones({2}, DType::F64);
  const Shape shape{2, 3};
  EXPECT_THROW(
      rules::value_selecting_reduction_backward(g, 1, from_vector(std::vector<std::int64_t>{0, 3}, {2}), shape, false),
      IndexError);
  EXPECT_THROW(
      rules::value_selecting_reduction_backward(g, 1, from_vector(std::vector<std::int64_t>{-1, 0}, {2}), shape, false),
      IndexError);
  EXPECT_THROW(rules::value_selecting_reduction_backward(g, 1, zeros({3}, DType::I64), shape, false), ValueError);
  EXPECT_THROW(rules::value_selecting_reduction_backward(g, 1, zeros({2}, DType::I32), shape, false), ValueError);
  EXPECT_THROW(rules::value_selecting_reduction_backward(g, 2, zeros({2}, DType::I64), shape, false), IndexError);
}

}  // namespace
}  // namespace kael
