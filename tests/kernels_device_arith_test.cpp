// The per-element arithmetic the CUDA kernels run (kernels/binary_arith.hpp,
// kernels/unary_arith.hpp), checked here on the host on every machine: each formula against
// its definition computed in double, over a sweep that includes the special values, and the
// rules (NaN, signed zeros) against the CPU's tensor ops, which call the same functions.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/binary_arith.hpp"
#include "kernels/unary_arith.hpp"

namespace kael::kernels::arith {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> sweep() {
  std::vector<float> xs = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-6f, 0.5f, -0.5f, 1.0f, -1.0f, 3.0f, -3.0f, 10.0f, -10.0f, 30.0f};
  for (int i = -400; i <= 400; ++i) xs.push_back(static_cast<float>(i) / 37.0f);
  return xs;
}

double phi(double x) { return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))); }

// Each op's definition in double, for x where it is finite.
double reference(Unary op, double x) {
  const double pi = 3.14159265358979323846;
  const double u = std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x);
  switch (op) {
    case Unary::neg: return -x;
    case Unary::abs: return std::fabs(x);
    case Unary::relu: return x < 0 ? 0.0 : x;
    case Unary::exp: return std::exp(x);
    case Unary::log: return std::log(x);
    case Unary::sqrt: return std::sqrt(x);
    case Unary::rsqrt: return 1.0 / std::sqrt(x);
    case Unary::tanh: return std::tanh(x);
    case Unary::sin: return std::sin(x);
    case Unary::cos: return std::cos(x);
    case Unary::sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case Unary::gelu_erf: return x * phi(x);
    case Unary::gelu_tanh: return 0.5 * x * (1.0 + std::tanh(u));
    case Unary::gelu_erf_derivative: return phi(x) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * pi);
    case Unary::gelu_tanh_derivative: {
      const double th = std::tanh(u);
      return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * std::sqrt(2.0 / pi) * (1.0 + 3.0 * 0.044715 * x * x);
    }
  }
  return 0.0;
}

TEST(DeviceArith, EachUnaryFormulaIsItsDefinition) {
  const Unary ops[] = {Unary::neg, Unary::abs, Unary::relu, Unary::exp, Unary::log, Unary::sqrt, Unary::rsqrt,
                       Unary::tanh, Unary::sin, Unary::cos, Unary::sigmoid, Unary::gelu_erf, Unary::gelu_tanh,
                       Unary::gelu_erf_derivative, Unary::gelu_tanh_derivative};
  for (const Unary op : ops)
    for (const float x : sweep()) {
      const double want = reference(op, x);
      if (!std::isfinite(want)) continue;
      const float got = unary(op, x);
      // A few float roundings of each step: 4e-6 relative, or absolute near zero (where a
      // difference of two terms, as in gelu's derivative, loses its relative accuracy).
      EXPECT_NEAR(got, want, 4e-6 * std::fabs(want) + 1e-6) << static_cast<int>(op) << " at " << x;
    }
}

TEST(DeviceArith, UnaryRulesAtSpecialValues) {
  EXPECT_TRUE(std::signbit(unary(Unary::abs, -0.0f)));  // the CPU's rule: x < 0 ? -x : x
  EXPECT_TRUE(std::signbit(unary(Unary::relu, -0.0f)));
  EXPECT_TRUE(std::isnan(unary(Unary::relu, kNan)));
  EXPECT_EQ(unary(Unary::exp, -kInf), 0.0f);
  EXPECT_EQ(unary(Unary::exp, 100.0f), kInf);
  EXPECT_EQ(unary(Unary::sigmoid, -200.0f), 0.0f);
  EXPECT_EQ(unary(Unary::sigmoid, 200.0f), 1.0f);
  EXPECT_EQ(unary(Unary::tanh, kInf), 1.0f);
  EXPECT_TRUE(std::isnan(unary(Unary::gelu_erf, -kInf)));  // -inf * 0, as torch's CUDA formula gives
  EXPECT_TRUE(std::isnan(unary(Unary::log, -1.0f)));
  EXPECT_EQ(unary(Unary::rsqrt, 0.0f), kInf);
}

TEST(DeviceArith, MaximumMinimumAndComparisonsAsTorch) {
  EXPECT_TRUE(std::isnan(maximum(kNan, 1.0f)));
  EXPECT_TRUE(std::isnan(maximum(1.0f, kNan)));
  EXPECT_TRUE(std::isnan(minimum(kNan, 1.0f)));
  EXPECT_EQ(maximum(2.0f, -3.0f), 2.0f);
  EXPECT_EQ(minimum(2.0f, -3.0f), -3.0f);
  EXPECT_EQ(binary(Binary::maximum, 1.0f, 5.0f, 1.0f), 5.0f);
  EXPECT_EQ(binary(Binary::minimum, 1.0f, 5.0f, 1.0f), 1.0f);
  EXPECT_EQ(binary(Binary::add, 1.0f, 5.0f, -1.0f), -4.0f);
  EXPECT_TRUE(compare(Compare::ne, kNan, kNan));
  EXPECT_FALSE(compare(Compare::eq, kNan, kNan));
  EXPECT_FALSE(compare(Compare::le, kNan, 1.0f));
  EXPECT_TRUE(compare(Compare::le, 1.0f, 1.0f));
  EXPECT_FALSE(compare(Compare::lt, 1.0f, 1.0f));
  EXPECT_TRUE(compare(Compare::ge, -0.0f, 0.0f));
  EXPECT_TRUE(compare(Compare::gt, 2, 1));
}

}  // namespace
}  // namespace kael::kernels::arith
