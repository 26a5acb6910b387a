// Helpers shared by the tests of the tensor library's named backward rules: an op's gradient by
// central differences in F64, and a scale-aware comparison.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>

#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"

namespace kael::tensor_backward_testing {

// d(sum(f(x) * g))/dx by central differences, x F64.
inline Tensor numeric_gradient(const std::function<Tensor(const Tensor&)>& f, const Tensor& x, const Tensor& g) {
  const autograd::NoGradGuard no_grad;
  const Tensor base = x.contiguous().clone();
  Tensor grad = zeros(base.shape(), DType::F64);
  const double h = 1e-6;
  for (std::int64_t i = 0; i < base.numel(); ++i) {
    const auto at = [&](double delta) {
      Tensor moved = base.clone();
      moved.data<double>()[i] += delta;
      return sum(mul(f(moved), g)).item<double>();
    };
    grad.data<double>()[i] = (at(h) - at(-h)) / (2 * h);
  }
  return grad;
}

// |got - want| <= tolerance * the largest |want| (and a floor for a gradient that is all zeros).
inline void expect_close(const Tensor& got, const Tensor& want, double tolerance, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  double largest = 1e-12;
  for (std::int64_t i = 0; i < want.numel(); ++i) largest = std::max(largest, std::abs(want.value_as_double(i)));
  for (std::int64_t i = 0; i < want.numel(); ++i)
    ASSERT_NEAR(got.value_as_double(i), want.value_as_double(i), tolerance * largest + 1e-9)
        << what << " element " << i;
}

}  // namespace kael::tensor_backward_testing
