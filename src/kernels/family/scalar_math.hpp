// The scalar forms of the rules every kernel set and reference shares: GPT-2's GELU (and its
// derivative) and the output epilogue. Templates on the arithmetic type: float in the portable kernels, double in
// the references. `static`, so that no unit compiled with wider ISA flags can lend its copy to
// a baseline caller.
#pragma once

#include <cmath>

#include "kernels/gemm.hpp"

namespace kael::kernels {

// GELU's tanh form, gelu_new(x) = 0.5 x (1 + tanh(u)), u = kGeluScale (x + kGeluCubic x^3): the
// one definition of its constants, which the vector forms (math.hpp) round to float.
inline constexpr double kGeluScale = 0.7978845608028654;  // sqrt(2 / pi)
inline constexpr double kGeluCubic = 0.044715;

// gelu_new(x), the tanh form GPT-2 uses (Hugging Face's "gelu_new", torch's
// gelu(approximate="tanh")). The vector kernels compute the same function as x / (1 + e^(-2u)).
template <class T>
static inline T gelu_tanh(T x) {
  const T scale = static_cast<T>(kGeluScale), cubic = static_cast<T>(kGeluCubic);
  return static_cast<T>(0.5) * x * (static_cast<T>(1) + std::tanh(scale * (x + cubic * x * x * x)));
}

// gelu_tanh'(x): 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) du/dx, du/dx = kGeluScale (1 + 3 kGeluCubic x^2).
template <class T>
static inline T gelu_tanh_derivative(T x) {
  const T sqrt_2_over_pi = static_cast<T>(kGeluScale), cubic = static_cast<T>(kGeluCubic);
  const T th = std::tanh(sqrt_2_over_pi * (x + cubic * x * x * x));
  const T du = sqrt_2_over_pi * (static_cast<T>(1) + static_cast<T>(3) * cubic * x * x);
  return static_cast<T>(0.5) * (static_cast<T>(1) + th) + static_cast<T>(0.5) * x * (static_cast<T>(1) - th * th) * du;
}

// Writes y (a product plus its bias) to out through the epilogue: out = y, gelu(y) or out + y.
template <class T>
static inline void store_epilogue(float& out, T y, Epilogue epilogue) {
  if (epilogue == Epilogue::gelu) y = gelu_tanh(y);
  out = static_cast<float>(epilogue == Epilogue::residual ? out + y : y);
}

}  // namespace kael::kernels
