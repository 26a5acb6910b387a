#include "tensor/device_elementwise.hpp"

#include "kael/core/dtype.hpp"
#include "kael/tensor/ops.hpp"
#include "kernels/cuda.hpp"

namespace kael::tensor_detail {

namespace {

// The device of an op on `a` and `b`: theirs when both are on it; a CPU scalar joins a device tensor.
Device common_device(const char* op, const Tensor& a, const Tensor& b) {
  if (a.device() == b.device()) return a.device();
  if (a.device().type == Device::Type::cpu && a.dim() == 0) return b.device();
  if (b.device().type == Device::Type::cpu && b.dim() == 0) return a.device();
  check_same_device(op, a.device(), b.device());  // throws: two devices
  return a.device();
}

}  // namespace

void refuse_on_device(const char* op, const Tensor& a, const Tensor& b) {
  const Device device = common_device(op, a, b);
  throw Error(str(op, " is not implemented on ", device.str(), " yet (copy the tensors with .cpu() first)"));
}

Tensor device_binary(const char* op, kernels::arith::Binary kind, const Tensor& a, const Tensor& b, double alpha) {
  const Device device = common_device(op, a, b);
  if (a.dtype() != DType::F32 || b.dtype() != DType::F32)
    throw Error(str(op, " on ", device.str(), " is implemented for float32 tensors only so far, got ", dtype_name(a.dtype()),
                    " and ", dtype_name(b.dtype())));
  const bool a_single = a.numel() == 1, b_single = b.numel() == 1;
  const bool same_shape = a.shape() == b.shape();
  if (!(same_shape || a_single || b_single) || !a.is_contiguous() || !b.is_contiguous())
    throw Error(str(op, " on ", device.str(), " is implemented for contiguous tensors of one shape (or one element) so far, got ",
                    shape_to_string(a.shape()), " and ", shape_to_string(b.shape()),
                    " (broadcasting and strided views are not implemented on CUDA yet)"));
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  const Tensor da = a.to(device), db = b.to(device);  // a CPU scalar is copied over; the rest are there
  Tensor out = Tensor::empty(DType::F32, shape, device);
#if KAEL_WITH_CUDA
  const std::int64_t n = out.numel();
  kernels::cuda::binary_f32(device.index, kind, out.device_data<float>(), da.device_data<float>(),
                            da.numel() == n ? 1 : 0, db.device_data<float>(), db.numel() == n ? 1 : 0, n,
                            static_cast<float>(alpha));
#else
  (void)kind;
  (void)alpha;
#endif
  return out;
}

}  // namespace kael::tensor_detail
