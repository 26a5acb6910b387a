// The per-element arithmetic of the binary ops and comparisons that run on the CPU and on CUDA devices: one
// definition, called by the CPU's loops (src/tensor/elementwise.cpp) and by the CUDA kernels
// (targets/cuda/elementwise.cu), so the CPU's tests check the arithmetic the GPU runs. The CUDA
// file is compiled without fused multiply-add (src/CMakeLists.txt), as the CPU code is, so the
// two round alike.
#pragma once

#include <math.h>

#if defined(__CUDACC__)
#define KAEL_HOST_DEVICE __host__ __device__
#else
#define KAEL_HOST_DEVICE
#endif

namespace kael::kernels::arith {

// The binary ops with a CUDA kernel (sub is add with alpha -1).
enum class Binary { add, mul, div, maximum, minimum, pow };
// The comparisons, each giving a bool.
enum class Compare { eq, ne, lt, le, gt, ge };

// add, mul and div give the type of the built-in expression (int for bool or int8, as C++ promotes;
// the caller stores the result in the output's dtype).
template <class T>
KAEL_HOST_DEVICE inline auto add(T x, T y) {
  return x + y;
}
// x + alpha * y (torch.add's alpha).
template <class T>
KAEL_HOST_DEVICE inline T add_scaled(T x, T y, T alpha) {
  return static_cast<T>(x + alpha * y);
}
template <class T>
KAEL_HOST_DEVICE inline auto mul(T x, T y) {
  return x * y;
}
template <class T>
KAEL_HOST_DEVICE inline auto div(T x, T y) {
  return x / y;
}

// maximum and minimum as torch's: a NaN on either side is the result.
template <class T>
KAEL_HOST_DEVICE inline T maximum(T x, T y) {
  if (x != x) return x;
  if (y != y) return y;
  return x < y ? y : x;
}
template <class T>
KAEL_HOST_DEVICE inline T minimum(T x, T y) {
  if (x != x) return x;
  if (y != y) return y;
  return y < x ? y : x;
}

// x to the power y: the C library's powf on the host, the CUDA math library's on a device.
KAEL_HOST_DEVICE inline float power(float x, float y) { return ::powf(x, y); }
KAEL_HOST_DEVICE inline double power(double x, double y) { return ::pow(x, y); }

// `op` on one element pair; alpha applies to add only.
template <class T>
KAEL_HOST_DEVICE inline T binary(Binary op, T x, T y, T alpha) {
  switch (op) {
    case Binary::add: return add_scaled(x, y, alpha);
    case Binary::mul: return static_cast<T>(mul(x, y));
    case Binary::div: return static_cast<T>(div(x, y));
    case Binary::maximum: return maximum(x, y);
    case Binary::minimum: return minimum(x, y);
    case Binary::pow: return static_cast<T>(power(x, y));
  }
  return x;
}

template <class T>
KAEL_HOST_DEVICE inline bool compare(Compare op, T x, T y) {
  switch (op) {
    case Compare::eq: return x == y;
    case Compare::ne: return x != y;
    case Compare::lt: return x < y;
    case Compare::le: return x <= y;
    case Compare::gt: return x > y;
    case Compare::ge: return x >= y;
  }
  return false;
}

}  // namespace kael::kernels::arith
