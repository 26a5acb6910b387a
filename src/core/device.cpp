#include "kael/core/device.hpp"

#include <charconv>

#include "core/cuda_runtime.hpp"
#include "kael/core/error.hpp"

namespace kael {

std::string Device::str() const {
  return type == Type::cpu ? std::string("cpu") : "cuda:" + std::to_string(index);
}

Device parse_device(std::string_view name) {
  Device device;
  if (name == "cpu") return device;
  if (name.substr(0, 4) == "cuda") {
    device.type = Device::Type::cuda;
    std::string_view rest = name.substr(4);
    if (!rest.empty()) {
      if (rest[0] != ':' || rest.size() == 1)
        throw ValueError(str("unknown device '", name, "' (expected cpu, cuda or cuda:N)"));
      const auto [end, ec] = std::from_chars(rest.data() + 1, rest.data() + rest.size(), device.index);
      if (ec != std::errc() || end != rest.data() + rest.size() || device.index < 0)
        throw ValueError(str("unknown device '", name, "' (expected cpu, cuda or cuda:N)"));
    }
    check_device_available(device);
    return device;
  }
  throw ValueError(str("unknown device '", name, "' (expected cpu, cuda or cuda:N)"));
}

void check_device_available(Device device) {
  if (device.type == Device::Type::cuda) cuda_runtime::require_device(device.index);
}

void check_same_device(std::string_view op, Device a, Device b) {
  if (a != b)
    throw ValueError(str(op, ": expected all tensors on the same device, got ", a.str(), " and ", b.str()));
}

}  // namespace kael
