// The tensor ops' path for tensors on a CUDA device: the checks (one device, the dtypes the
// device kernels cover so far), the layout each kernel walks, and the call into the CUDA target.
// Every function here is called only for operands on a device (on_device); in a build without
// the CUDA backend no tensor can be on one, so they are never reached there.
#pragma once

#include <utility>
#include <vector>

#include "kael/core/tensor.hpp"
#include "kernels/binary_arith.hpp"
#include "kernels/unary_arith.hpp"

namespace kael::tensor_detail {

// True when `a` (or `b`) is on a device other than the CPU.
inline bool on_device(const Tensor& a) { return a.device().type != Device::Type::cpu; }
inline bool on_device(const Tensor& a, const Tensor& b) { return on_device(a) || on_device(b); }

// `op` (with `alpha` for add) of two tensors, one of them on a CUDA device: the other must be on
// the same device, or a CPU tensor of no dimensions (a scalar, as torch allows), else a
// ValueError naming both devices. Broadcasting and strided views as on the CPU; float32
// operands, else an Error saying that the dtype is not implemented on CUDA yet.
Tensor device_binary(const char* op, kernels::arith::Binary kind, const Tensor& a, const Tensor& b, double alpha = 1.0);
// A comparison of the same operands: a BOOL tensor on the device.
Tensor device_compare(const char* op, kernels::arith::Compare kind, const Tensor& a, const Tensor& b);
// `kind` of each element of a float32 tensor on a device.
Tensor device_unary(const char* op, kernels::arith::Unary kind, const Tensor& a);
// where(condition, a, b) with a BOOL condition and float32 a and b, on one device (CPU scalars join).
Tensor device_where(const Tensor& condition, const Tensor& a, const Tensor& b);
// out (contiguous, on the device) = source broadcast to out's shape and converted to out's
// dtype, source on the same device.
void device_convert_into(Tensor& out, const Tensor& source);
// The float32 sum of `input` over the dims where `reduce` is true, with those dims kept as 1.
Tensor device_sum(const Tensor& input, const std::vector<bool>& reduce);
// The largest (or smallest) float32 elements of `input` along dim `at` and their indices (I64),
// both with that dim kept as 1, by torch's rule (a NaN wins; the first of equals).
std::pair<Tensor, Tensor> device_extreme(const Tensor& input, int at, bool largest);
// A tensor of `shape` on `device` with every element `value` (stored as `dtype` stores it).
Tensor device_full(const Shape& shape, double value, DType dtype, Device device);

// For the ops without a device kernel: a ValueError for tensors on two devices, else an Error
// saying that `op` is not implemented on that device yet.
[[noreturn]] void refuse_on_device(const char* op, const Tensor& a, const Tensor& b);
[[noreturn]] void refuse_on_device(const char* op, const Tensor& a);

}  // namespace kael::tensor_detail
