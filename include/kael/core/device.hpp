// Where a tensor's values live. This build has one backend, the CPU; the device is a real field
// of every tensor so that another backend can join without changing the API.
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
// cannot use (every CUDA device: the build is CPU-only).
Device parse_device(std::string_view name);
// Error unless this build can hold tensors on `device`.
void check_device_available(Device device);

}  // namespace kael
