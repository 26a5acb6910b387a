// The per-element arithmetic of the one-input ops on CUDA devices (targets/cuda/elementwise.cu),
// callable on the host too, so that the CPU's tests check each formula the GPU runs
// (tests/kernels_device_arith_test.cpp). neg, abs and relu are the CPU's own rules
// (src/tensor/elementwise.cpp calls them); the transcendental ones call the C names (expf,
// tanhf, erff, ...), which are the CUDA math library's on the device, as torch's CUDA kernels
// call them, while the CPU keeps its vector kernels (kernels/exp.hpp): the two agree within a
// few ulp, not bit for bit.
#pragma once

#include <math.h>

#include "kernels/binary_arith.hpp"  // KAEL_HOST_DEVICE

namespace kael::kernels::arith {

enum class Unary {
  neg, abs, relu, exp, log, sqrt, rsqrt, tanh, sin, cos, sigmoid,
  gelu_erf, gelu_tanh, gelu_erf_derivative, gelu_tanh_derivative,
};

// -0.0 stays -0.0 under abs and relu, and a NaN passes through both (torch's abs gives +0.0
// for -0.0; kael's CPU rule is kept).
template <class T>
KAEL_HOST_DEVICE inline T neg(T x) {
  return -x;
}
template <class T>
KAEL_HOST_DEVICE inline T abs(T x) {
  return x < T{} ? -x : x;
}
template <class T>
KAEL_HOST_DEVICE inline T relu(T x) {
  return x < T{} ? T{} : x;
}

// GELU's constants: 1 / sqrt(2), 1 / sqrt(2 pi), and the tanh form's sqrt(2 / pi) and cubic
// coefficient (kernels/family/scalar_math.hpp holds the same, for the CPU's kernels).
inline constexpr float kInvSqrt2 = 0.70710678118654752f;
inline constexpr float kInvSqrt2Pi = 0.39894228040143268f;
inline constexpr float kGeluTanhScale = 0.7978845608028654f;
inline constexpr float kGeluTanhCubic = 0.044715f;

KAEL_HOST_DEVICE inline float unary(Unary op, float x) {
  switch (op) {
    case Unary::neg: return neg(x);
    case Unary::abs: return abs(x);
    case Unary::relu: return relu(x);
    case Unary::exp: return expf(x);
    case Unary::log: return logf(x);
    case Unary::sqrt: return sqrtf(x);
    case Unary::rsqrt: return 1.0f / sqrtf(x);
    case Unary::tanh: return tanhf(x);
    case Unary::sin: return sinf(x);
    case Unary::cos: return cosf(x);
    case Unary::sigmoid: return 1.0f / (1.0f + expf(-x));
    case Unary::gelu_erf: return 0.5f * x * (1.0f + erff(x * kInvSqrt2));
    case Unary::gelu_tanh: {
      const float u = kGeluTanhScale * (x + kGeluTanhCubic * x * x * x);
      return 0.5f * x * (1.0f + tanhf(u));
    }
    case Unary::gelu_erf_derivative: {
      const float cdf = 0.5f * (1.0f + erff(x * kInvSqrt2));
      return cdf + x * expf(-0.5f * x * x) * kInvSqrt2Pi;
    }
    case Unary::gelu_tanh_derivative: {
      const float th = tanhf(kGeluTanhScale * (x + kGeluTanhCubic * x * x * x));
      const float du = kGeluTanhScale * (1.0f + 3.0f * kGeluTanhCubic * x * x);
      return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
    }
  }
  return x;
}

}  // namespace kael::kernels::arith
