// One element of the optimizers' updates (torch.optim's SGD and Adam/AdamW), as the CPU's loops
// (src/optim) and the CUDA kernels (targets/cuda/optim.cu) both run it: the same operations in
// the same order, each rounded to T, so a device's update equals the CPU's where the device
// rounds each operation alike (the CUDA file is compiled without fused multiply-add).
#pragma once

#include <math.h>

#include "kernels/binary_arith.hpp"  // KAEL_HOST_DEVICE

namespace kael::kernels::arith {

// Adam's scalars in T (torch's kernels round them so).
template <class T>
struct AdamConstants {
  T decay;       // AdamW: 1 - lr * weight_decay (1: none, which multiplies exactly)
  T l2;          // Adam: weight_decay added to the gradient
  T w1, rest1;   // 1 - beta1, and 1 - w1 for torch's lerp from the far end
  T beta2, w2;   // beta2, 1 - beta2
  T eps;
  T step;        // -lr / (1 - beta1^t)
  T bias2_sqrt;  // sqrt(1 - beta2^t)
};

// The square root, correctly rounded in both types (the C library's, CUDA's by default).
KAEL_HOST_DEVICE inline float root(float x) { return ::sqrtf(x); }
KAEL_HOST_DEVICE inline double root(double x) { return ::sqrt(x); }

template <class T, bool kAddsL2, bool kLerpLow>
KAEL_HOST_DEVICE inline void adam_element(T& p, T g, T& m, T& v, const AdamConstants<T>& c) {
  const T x = p * c.decay;
  const T d = kAddsL2 ? g + c.l2 * x : g;  // torch adds no 0 * p (inf * 0)
  const T mi = kLerpLow ? m + c.w1 * (d - m) : d - (d - m) * c.rest1;
  const T vi = v * c.beta2 + c.w2 * d * d;
  m = mi;
  v = vi;
  p = x + c.step * mi / (root(vi) / c.bias2_sqrt + c.eps);  // torch's addcdiv: (value * m) / denom
}

// SGD's scalars in T.
template <class T>
struct SgdConstants {
  T weight_decay, momentum, keep;  // keep: 1 - dampening
  T step;                          // -lr
  bool decays, nesterov;
};

// Without momentum (buf unused).
template <class T>
KAEL_HOST_DEVICE inline void sgd_element(T& p, T g, const SgdConstants<T>& c) {
  p += c.step * (c.decays ? g + c.weight_decay * p : g);
}

// With momentum: buf is the momentum buffer, set to the first step's direction when `first`.
template <class T>
KAEL_HOST_DEVICE inline void sgd_momentum_element(T& p, T g, T& buf, bool first, const SgdConstants<T>& c) {
  const T d = c.decays ? g + c.weight_decay * p : g;  // torch adds no 0 * p (inf * 0)
  const T b = first ? d : buf * c.momentum + c.keep * d;
  buf = b;
  p += c.step * (c.nesterov ? d + c.momentum * b : b);
}

}  // namespace kael::kernels::arith
