// Where a tensor's values live: the CPU, or a CUDA device in a build with the CUDA backend
// (kael/core/cuda.hpp).
#pragma once

#include <string>
#include <string_view>

namespace kael {

struct Device {
  enum class Type { cpu, cuda };
  Type type = Type::cpu;
  int index = 0;

  static Device cpu() { return {}; }
  bool operator==(const Device&) const = default;
  std::string str() const;
};

// "cpu", "cuda" or "cuda:N". ValueError for any other name; Error for a device this build
// cannot use, naming the cause: a CPU-only build, no NVIDIA driver, a driver too old, no GPU, or
// an index past the last device.
Device parse_device(std::string_view name);
// Error unless this build, on this machine, can hold tensors on `device`.
void check_device_available(Device device);
// ValueError naming both devices unless `a` and `b` are the same: `op` was given tensors on two.
void check_same_device(std::string_view op, Device a, Device b);

}  // namespace kael
