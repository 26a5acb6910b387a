// The per-element arithmetic of the binary ops that run on the CPU and on CUDA devices: one
// definition, called by the CPU's loops (src/tensor/elementwise.cpp) and by the CUDA kernels
// (targets/cuda/elementwise.cu), so the CPU's tests check the arithmetic the GPU runs. The CUDA
// file is compiled without fused multiply-add (src/CMakeLists.txt), as the CPU code is, so the
// two round alike.
#pragma once

#if defined(__CUDACC__)
#define KAEL_HOST_DEVICE __host__ __device__
#else
#define KAEL_HOST_DEVICE
#endif

namespace kael::kernels::arith {

// The binary ops with a CUDA kernel (sub is add with alpha -1).
enum class Binary { add, mul, div };

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

// `op` on one element pair; alpha applies to add only.
template <class T>
KAEL_HOST_DEVICE inline T binary(Binary op, T x, T y, T alpha) {
  switch (op) {
    case Binary::add: return add_scaled(x, y, alpha);
    case Binary::mul: return static_cast<T>(mul(x, y));
    case Binary::div: return static_cast<T>(div(x, y));
  }
  return x;
}

}  // namespace kael::kernels::arith
