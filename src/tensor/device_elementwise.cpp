#include "tensor/device_elementwise.hpp"

#include <cstring>
#include <initializer_list>
#include <optional>

#include "kael/core/dtype.hpp"
#include "kael/tensor/ops.hpp"
#include "kernels/cuda.hpp"
#include "tensor/strided.hpp"

namespace kael::tensor_detail {

namespace {

namespace cuda = kernels::cuda;

// The device of an op on `operands`: theirs when all are on it; a CPU scalar (a tensor of no
// dims) joins a device tensor, as in torch; two devices are a ValueError naming them.
Device common_device(const char* op, std::initializer_list<const Tensor*> operands) {
  std::optional<Device> device;
  for (const Tensor* t : operands) {
    if (t->device().type == Device::Type::cpu && t->dim() == 0) continue;
    if (!device) device = t->device();
    else check_same_device(op, *device, t->device());  // throws where they differ
  }
  return device ? *device : Device::cpu();
}

Device common_device(const char* op, const Tensor& a, const Tensor& b) { return common_device(op, {&a, &b}); }

void require_f32(const char* op, Device device, const Tensor& a, const Tensor& b) {
  if (a.dtype() != DType::F32 || b.dtype() != DType::F32)
    throw Error(str(op, " on ", device.str(), " is implemented for float32 tensors only so far, got ",
                    dtype_name(a.dtype()), " and ", dtype_name(b.dtype())));
}

// Element strides of `t` broadcast to `shape` (0 along a dim it is broadcast over).
std::vector<std::int64_t> element_strides(const Tensor& t, const Shape& shape) {
  std::vector<std::int64_t> strides = broadcast_byte_strides(t, shape);
  for (std::int64_t& s : strides) s /= static_cast<std::int64_t>(t.element_size());
  return strides;
}

// The device's form of a merged layout: operands first, first + 1, ... of `layout` as the walk's
// inputs (an Error where more dims are left than a walk holds).
template <int N, std::size_t M>
cuda::Walk<N> walk_from(const Layout<M>& layout, std::size_t first, const char* op) {
  if (layout.shape.size() > static_cast<std::size_t>(cuda::kMaxDims))
    throw Error(str(op, " on CUDA takes at most ", cuda::kMaxDims, " dims after merging, got ", layout.shape.size(),
                    " (make the tensors contiguous first)"));
  cuda::Walk<N> walk;
  walk.rank = static_cast<int>(layout.shape.size());
  for (std::size_t d = 0; d < layout.shape.size(); ++d) {
    walk.shape[d] = layout.shape[d];
    for (std::size_t k = 0; k < static_cast<std::size_t>(N); ++k) walk.strides[k][d] = layout.strides[first + k][d];
  }
  return walk;
}

// The walk of an elementwise op over `shape` with a new contiguous output: the dims that are
// contiguous in the output and every input merged, as the CPU's loops merge them.
template <int N>
cuda::Walk<N> walk_of(const char* op, const Shape& shape, const Tensor* const (&inputs)[N]) {
  std::vector<std::int64_t> strides[N + 1];
  strides[0].assign(shape.size(), 1);  // the output's own, contiguous
  for (std::size_t d = shape.size(); d-- > 1;) strides[0][d - 1] = strides[0][d] * shape[d];
  for (int k = 0; k < N; ++k) strides[k + 1] = element_strides(*inputs[k], shape);
  return walk_from<N>(coalesce(shape, strides), 1, op);
}

// The walk over the dims of `t` where `which` is true, in order, with t's strides.
cuda::Walk<1> walk_over(const char* op, const Tensor& t, const std::vector<bool>& which) {
  Shape shape;
  std::vector<std::int64_t> strides[1];
  for (std::size_t d = 0; d < which.size(); ++d)
    if (which[d]) {
      shape.push_back(t.shape()[d]);
      strides[0].push_back(t.strides()[d]);
    }
  return walk_from<1>(coalesce(shape, strides), 0, op);
}

cuda::Element element_of(DType dtype, const char* op) {
  switch (dtype) {
    case DType::BOOL: return cuda::Element::boolean;
    case DType::U8: return cuda::Element::u8;
    case DType::I8: return cuda::Element::i8;
    case DType::I16: return cuda::Element::i16;
    case DType::I32: return cuda::Element::i32;
    case DType::I64: return cuda::Element::i64;
    case DType::F16: return cuda::Element::f16;
    case DType::BF16: return cuda::Element::bf16;
    case DType::F32: return cuda::Element::f32;
    case DType::F64: return cuda::Element::f64;
    default: break;
  }
  throw Error(str(op, ": ", dtype_name(dtype), " tensors are not implemented on CUDA yet"));
}

}  // namespace

void refuse_on_device(const char* op, const Tensor& a, const Tensor& b) {
  const Device device = common_device(op, a, b);
  throw Error(str(op, " is not implemented on ", device.str(), " yet (copy the tensors with .cpu() first)"));
}

void refuse_on_device(const char* op, const Tensor& a) { refuse_on_device(op, a, a); }

Tensor device_binary(const char* op, kernels::arith::Binary kind, const Tensor& a, const Tensor& b, double alpha) {
  const Device device = common_device(op, a, b);
  require_f32(op, device, a, b);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  const Tensor da = a.to(device), db = b.to(device);  // a CPU scalar is copied over; the rest are there
  const Tensor* const inputs[2] = {&da, &db};
  const cuda::Walk<2> walk = walk_of(op, shape, inputs);
  Tensor out = Tensor::empty(DType::F32, shape, device);
  cuda::binary_f32(device.index, kind, out.device_data<float>(), da.device_data<float>(),
                   db.device_data<float>(), walk, out.numel(), static_cast<float>(alpha));
  return out;
}

Tensor device_compare(const char* op, kernels::arith::Compare kind, const Tensor& a, const Tensor& b) {
  const Device device = common_device(op, a, b);
  require_f32(op, device, a, b);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  const Tensor da = a.to(device), db = b.to(device);
  const Tensor* const inputs[2] = {&da, &db};
  const cuda::Walk<2> walk = walk_of(op, shape, inputs);
  Tensor out = Tensor::empty(DType::BOOL, shape, device);
  cuda::compare_f32(device.index, kind, out.device_data<std::uint8_t>(), da.device_data<float>(),
                    db.device_data<float>(), walk, out.numel());
  return out;
}

Tensor device_unary(const char* op, kernels::arith::Unary kind, const Tensor& a) {
  const Device device = a.device();
  if (a.dtype() != DType::F32)
    throw Error(str(op, " on ", device.str(), " is implemented for float32 tensors only so far, got ",
                    dtype_name(a.dtype())));
  const Tensor* const inputs[1] = {&a};
  const cuda::Walk<1> walk = walk_of(op, a.shape(), inputs);
  Tensor out = Tensor::empty(DType::F32, a.shape(), device);
  cuda::unary_f32(device.index, kind, out.device_data<float>(), a.device_data<float>(), walk, out.numel());
  return out;
}

Tensor device_where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  const Device device = common_device("where", {&condition, &a, &b});
  require_f32("where", device, a, b);
  const Shape shape = broadcast_shapes(broadcast_shapes(condition.shape(), a.shape(), "where"), b.shape(), "where");
  const Tensor dc = condition.to(device), da = a.to(device), db = b.to(device);
  const Tensor* const inputs[3] = {&dc, &da, &db};
  const cuda::Walk<3> walk = walk_of("where", shape, inputs);
  Tensor out = Tensor::empty(DType::F32, shape, device);
  cuda::where_f32(device.index, out.device_data<float>(), dc.device_data<std::uint8_t>(),
                  da.device_data<float>(), db.device_data<float>(), walk, out.numel());
  return out;
}

void device_convert_into(Tensor& out, const Tensor& source) {
  check_same_device("copy", out.device(), source.device());
  if (!out.is_contiguous())
    throw Error(str("copying into a strided view on ", out.device().str(), " is not implemented yet"));
  const cuda::Element to = element_of(out.dtype(), "to"), from = element_of(source.dtype(), "to");
  const Tensor* const inputs[1] = {&source};
  const cuda::Walk<1> walk = walk_of("copy", out.shape(), inputs);
  cuda::convert(out.device().index, out.device_raw_data(), to, source.device_raw_data(), from, walk,
                out.numel());
}

Tensor device_sum(const Tensor& input, const std::vector<bool>& reduce) {
  if (input.dtype() != DType::F32)
    throw Error(str("sum on ", input.device().str(), " is implemented for float32 tensors only so far, got ",
                    dtype_name(input.dtype())));
  Shape keep_shape = input.shape();
  std::vector<bool> kept(reduce.size());
  std::int64_t n_reduced = 1;
  for (std::size_t i = 0; i < reduce.size(); ++i) {
    kept[i] = !reduce[i];
    if (reduce[i]) {
      n_reduced *= keep_shape[i];
      keep_shape[i] = 1;
    }
  }
  Tensor out = Tensor::empty(DType::F32, keep_shape, input.device());
  const cuda::Walk<1> kept_walk = walk_over("sum", input, kept), reduced_walk = walk_over("sum", input, reduce);
  cuda::sum_f32(input.device().index, out.device_data<float>(), input.device_data<float>(), kept_walk,
                out.numel(), reduced_walk, n_reduced);
  return out;
}

std::pair<Tensor, Tensor> device_extreme(const Tensor& input, int at, bool largest) {
  const char* op = largest ? "max" : "min";
  if (input.dtype() != DType::F32)
    throw Error(str(op, " on ", input.device().str(), " is implemented for float32 tensors only so far, got ",
                    dtype_name(input.dtype())));
  Shape keep_shape = input.shape();
  std::vector<bool> kept(keep_shape.size(), true);
  std::int64_t n = 1, step = 0;
  if (input.dim()) {
    const auto d = static_cast<std::size_t>(at);
    n = keep_shape[d];
    step = input.strides()[d];
    keep_shape[d] = 1;
    kept[d] = false;
  }
  Tensor values = Tensor::empty(DType::F32, keep_shape, input.device());
  Tensor indices = Tensor::empty(DType::I64, keep_shape, input.device());
  cuda::extreme_f32(input.device().index, values.device_data<float>(), indices.device_data<std::int64_t>(),
                    input.device_data<float>(), walk_over(op, input, kept), values.numel(), step, n, largest);
  return {values, indices};
}

Tensor device_full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor out = Tensor::empty(dtype, shape, device);
  std::uint64_t pattern = 0;  // the element's bytes, as the CPU stores it
  std::byte bytes[8] = {};
  store(dtype, bytes, value);
  std::memcpy(&pattern, bytes, sizeof(pattern));
  cuda::fill(device.index, out.device_raw_data(), out.element_size(), pattern, out.numel());
  return out;
}

}  // namespace kael::tensor_detail
