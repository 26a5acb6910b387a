// The CUDA runtime as the rest of kael reaches it: whether a device is usable (and why not),
// its memory (the caching allocator of core/device_allocator.hpp) and copies between host and
// device. Plain C++ declarations, the same in every build: a build without the CUDA backend
// defines them (src/core/cuda_runtime.cpp) as "this build runs on the CPU only".
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace kael::cuda_runtime {

// Why CUDA cannot be used, from what the runtime reported when asked for the device count.
enum class Failure { none, not_built, no_driver, driver_too_old, no_device, other };
struct Probe {
  Failure failure = Failure::none;
  int device_count = 0;
  int driver_version = 0;   // as cudaDriverGetVersion: 1000 * major + 10 * minor; 0 without a driver
  int runtime_version = 0;  // the CUDA version this build was compiled against, same form
  std::string detail;       // the runtime's own name and text for an unexpected error
};
// The message for a device kael cannot use: "device cuda:1 is not available: <the cause>".
// A pure function of `probe`, so every cause's text is tested on any machine.
std::string unavailable_message(int index, const Probe& probe);

// The probe of this process (asked once, then kept).
const Probe& probe();
// Throws Error(unavailable_message) unless cuda:`index` is usable.
void require_device(int index);

// Device memory on cuda:`index` from its caching allocator (the device must be usable).
std::shared_ptr<void> allocate(int index, std::size_t bytes);
// Copies, each finished when it returns (the host side may be pageable memory).
void copy_host_to_device(int index, void* device_dst, const void* host_src, std::size_t bytes);
void copy_device_to_host(int index, void* host_dst, const void* device_src, std::size_t bytes);
void copy_device_to_device(int dst_index, void* dst, int src_index, const void* src, std::size_t bytes);

// For the CUDA target's launches: makes cuda:`index` current for this thread, and throws an
// Error naming `kernel` if its launch failed.
void set_device(int index);
void check_launch(int index, const char* kernel);

}  // namespace kael::cuda_runtime
