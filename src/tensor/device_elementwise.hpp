// The elementwise ops' path for tensors on a CUDA device: the checks (one device, the layouts
// and dtypes the device kernels cover so far) and the call into the CUDA target.
#pragma once

#include "kael/core/tensor.hpp"
#include "kernels/binary_arith.hpp"

namespace kael::tensor_detail {

// True when `a` or `b` is on a device other than the CPU.
inline bool on_device(const Tensor& a, const Tensor& b) {
  return a.device().type != Device::Type::cpu || b.device().type != Device::Type::cpu;
}

// `op` (with `alpha` for add) of two tensors, one of them on a CUDA device: the other must be on
// the same device, or a CPU tensor of no dimensions (a scalar, as torch allows), else a
// ValueError naming both devices. Float32 operands of the same shape, contiguous, or one of a
// single element; anything else is an Error saying it is not implemented on CUDA yet.
Tensor device_binary(const char* op, kernels::arith::Binary kind, const Tensor& a, const Tensor& b, double alpha = 1.0);

// For the ops without a device kernel: a ValueError for tensors on two devices, else an Error
// saying that `op` is not implemented on that device yet.
[[noreturn]] void refuse_on_device(const char* op, const Tensor& a, const Tensor& b);

}  // namespace kael::tensor_detail
