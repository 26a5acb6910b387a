#include "core/device_copy.hpp"

#include <algorithm>

#include "core/cuda_runtime.hpp"

namespace kael {

namespace {

// A contiguous host copy of a tensor on a CUDA device. A strided view is copied as the span of
// storage it reaches, then packed on the host: one transfer, whatever the layout.
Tensor device_to_host(const Tensor& t) {
  const int index = t.device().index;
  if (t.is_contiguous()) {
    Tensor out = Tensor::empty(t.dtype(), t.shape());
    cuda_runtime::copy_device_to_host(index, out.raw_data(), t.device_raw_data(), t.nbytes());
    return out;
  }
  if (t.numel() == 0) return Tensor::empty(t.dtype(), t.shape());
  std::int64_t low = 0, high = 0;  // element offsets of the span, from the first element
  for (int d = 0; d < t.dim(); ++d) {
    const std::int64_t reach = (t.shape()[static_cast<std::size_t>(d)] - 1) * t.strides()[static_cast<std::size_t>(d)];
    low += std::min<std::int64_t>(reach, 0);
    high += std::max<std::int64_t>(reach, 0);
  }
  const auto element = static_cast<std::int64_t>(t.element_size());
  Tensor span = Tensor::empty(t.dtype(), {high - low + 1});
  cuda_runtime::copy_device_to_host(index, span.raw_data(), t.device_raw_data() + low * element, span.nbytes());
  return span.as_strided(t.shape(), t.strides(), -low).packed_copy();
}

}  // namespace

Tensor copy_to_device(const Tensor& t, Device device) {
  check_device_available(t.device());  // a borrowed tensor may name a device this machine lacks
  check_device_available(device);
  const Device from = t.device();
  if (from.type == Device::Type::cpu) {
    if (device.type == Device::Type::cpu) return t.packed_copy();
    const Tensor host = t.is_contiguous() ? t : t.packed_copy();
    Tensor out = Tensor::empty(t.dtype(), t.shape(), device);
    cuda_runtime::copy_host_to_device(device.index, out.device_raw_data(), host.raw_data(), host.nbytes());
    return out;
  }
  if (device.type == Device::Type::cpu) return device_to_host(t);
  if (!t.is_contiguous()) return copy_to_device(device_to_host(t), device);
  Tensor out = Tensor::empty(t.dtype(), t.shape(), device);
  cuda_runtime::copy_device_to_device(device.index, out.device_raw_data(), from.index, t.device_raw_data(), t.nbytes());
  return out;
}

}  // namespace kael
