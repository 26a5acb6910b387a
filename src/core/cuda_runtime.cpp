// The CUDA runtime behind core/cuda_runtime.hpp and kael/core/cuda.hpp. A build without the
// CUDA backend (KAEL_WITH_CUDA=0) compiles the same functions with no device: every probe says
// "not built", and nothing here is ever asked to touch device memory.
#include "core/cuda_runtime.hpp"

#include <atomic>
#include <mutex>
#include <vector>

#include "core/device_allocator.hpp"
#include "kael/core/cuda.hpp"
#include "kael/core/error.hpp"

#if KAEL_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace kael::cuda_runtime {

namespace {
std::string cuda_version(int version) { return str(version / 1000, ".", version % 1000 / 10); }
}  // namespace

std::string unavailable_message(int index, const Probe& probe) {
  const std::string head = str("device cuda:", index, " is not available: ");
  switch (probe.failure) {
    case Failure::not_built: return head + "this kael build runs on the CPU only (devices: cpu)";
    case Failure::no_driver:
      return head + str("no NVIDIA driver was found (libcuda.so.1 could not be loaded); this kael build needs a driver for CUDA ",
                        cuda_version(probe.runtime_version), " or newer");
    case Failure::driver_too_old:
      return head + str("the NVIDIA driver is too old: it supports CUDA ", cuda_version(probe.driver_version),
                        ", this kael build needs CUDA ", cuda_version(probe.runtime_version), " or newer");
    case Failure::no_device:
      return head + "the NVIDIA driver sees no CUDA device (check nvidia-smi and CUDA_VISIBLE_DEVICES)";
    case Failure::other: return head + str("CUDA could not be started (", probe.detail, ")");
    case Failure::none: break;
  }
  if (probe.device_count == 1) return head + "this machine has one CUDA device, cuda:0";
  return head + str("this machine has ", probe.device_count, " CUDA devices, cuda:0 to cuda:", probe.device_count - 1);
}

void require_device(int index) {
  const Probe& p = probe();
  if (p.failure != Failure::none || index < 0 || index >= p.device_count) throw Error(unavailable_message(index, p));
}

}  // namespace kael::cuda_runtime

#if KAEL_WITH_CUDA

namespace kael::cuda_runtime {

namespace {

[[noreturn]] void fail(cudaError_t error, const char* what, int index) {
  throw Error(str(what, " on cuda:", index, " failed: ", cudaGetErrorName(error), " (", cudaGetErrorString(error), ")"));
}

void check(cudaError_t error, const char* what, int index) {
  if (error != cudaSuccess) fail(error, what, index);
}

Probe run_probe() {
  Probe p;
  p.runtime_version = CUDART_VERSION;
  if (cudaDriverGetVersion(&p.driver_version) != cudaSuccess) p.driver_version = 0;
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error == cudaSuccess) {
    p.device_count = count;
    if (count == 0) p.failure = Failure::no_device;
    return p;
  }
  (void)cudaGetLastError();  // the runtime keeps the last error; this one is reported here
  if (error == cudaErrorInsufficientDriver)
    p.failure = p.driver_version == 0 ? Failure::no_driver : Failure::driver_too_old;
  else if (error == cudaErrorNoDevice)
    p.failure = Failure::no_device;
  else {
    p.failure = Failure::other;
    p.detail = str(cudaGetErrorName(error), ": ", cudaGetErrorString(error));
  }
  return p;
}

class CudaBackend final : public device_memory::Backend {
 public:
  explicit CudaBackend(int index) : index_(index) {}
  void* allocate(std::size_t bytes) override {
    set_device(index_);
    void* block = nullptr;
    const cudaError_t error = cudaMalloc(&block, bytes);
    if (error == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    check(error, "cudaMalloc", index_);
    return block;
  }
  void release(void* block) override {
    // Errors are not thrown from here (a tensor's destructor); at exit the runtime may be gone.
    if (cudaSetDevice(index_) == cudaSuccess) (void)cudaFree(block);
  }
  std::string name() const override { return str("cuda:", index_); }

 private:
  int index_;
};

// One allocator per device, made on first use and never destroyed: tensors may outlive statics.
std::mutex allocators_mutex;
std::vector<device_memory::CachingAllocator*>& allocators() {
  static auto* const list = new std::vector<device_memory::CachingAllocator*>();
  return *list;
}

device_memory::CachingAllocator* allocator_if_used(int index) {
  const std::lock_guard lock(allocators_mutex);
  auto& list = allocators();
  return index >= 0 && static_cast<std::size_t>(index) < list.size() ? list[static_cast<std::size_t>(index)] : nullptr;
}

device_memory::CachingAllocator& allocator(int index) {
  require_device(index);
  const std::lock_guard lock(allocators_mutex);
  auto& list = allocators();
  if (list.size() <= static_cast<std::size_t>(index)) list.resize(static_cast<std::size_t>(index) + 1, nullptr);
  auto& slot = list[static_cast<std::size_t>(index)];
  if (slot == nullptr) slot = new device_memory::CachingAllocator(std::make_unique<CudaBackend>(index));
  return *slot;
}

}  // namespace

const Probe& probe() {
  static const Probe result = run_probe();
  return result;
}

void set_device(int index) { check(cudaSetDevice(index), "cudaSetDevice", index); }

void check_launch(int index, const char* kernel) { check(cudaGetLastError(), kernel, index); }

std::shared_ptr<void> allocate(int index, std::size_t bytes) { return allocator(index).allocate(bytes); }

void copy_host_to_device(int index, void* device_dst, const void* host_src, std::size_t bytes) {
  if (bytes == 0) return;
  set_device(index);
  check(cudaMemcpy(device_dst, host_src, bytes, cudaMemcpyHostToDevice), "copy to the device", index);
}

void copy_device_to_host(int index, void* host_dst, const void* device_src, std::size_t bytes) {
  if (bytes == 0) return;
  set_device(index);
  check(cudaMemcpy(host_dst, device_src, bytes, cudaMemcpyDeviceToHost), "copy from the device", index);
}

void copy_device_to_device(int dst_index, void* dst, int src_index, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  set_device(src_index);
  if (dst_index == src_index)
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "copy on the device", src_index);
  else
    check(cudaMemcpyPeer(dst, dst_index, src, src_index, bytes), "copy between devices", src_index);
}

}  // namespace kael::cuda_runtime

namespace kael::cuda {

void synchronize() {
  if (!is_available()) return;
  for (int index = 0; index < cuda_runtime::probe().device_count; ++index) {
    if (cuda_runtime::allocator_if_used(index) == nullptr) continue;  // kael queued nothing there
    cuda_runtime::set_device(index);
    cuda_runtime::check(cudaDeviceSynchronize(), "synchronize", index);
  }
}

}  // namespace kael::cuda

#else  // a build without the CUDA backend

namespace kael::cuda_runtime {

namespace {
device_memory::CachingAllocator* allocator_if_used(int) { return nullptr; }
}  // namespace

const Probe& probe() {
  static const Probe result = [] {
    Probe p;
    p.failure = Failure::not_built;
    return p;
  }();
  return result;
}

std::shared_ptr<void> allocate(int index, std::size_t) {
  require_device(index);  // throws: no device in this build
  return nullptr;
}
void copy_host_to_device(int index, void*, const void*, std::size_t) { require_device(index); }
void copy_device_to_host(int index, void*, const void*, std::size_t) { require_device(index); }
void copy_device_to_device(int, void*, int src_index, const void*, std::size_t) { require_device(src_index); }
void set_device(int index) { require_device(index); }
void check_launch(int index, const char*) { require_device(index); }

}  // namespace kael::cuda_runtime

namespace kael::cuda {
void synchronize() {}
}  // namespace kael::cuda

#endif

namespace kael::cuda {

namespace {
std::atomic<std::uint64_t> seed{0x6b61656cULL};  // the CPU generator's default seed (tensor/creation.cpp)
}  // namespace

bool is_available() { return cuda_runtime::probe().failure == cuda_runtime::Failure::none; }
int device_count() { return is_available() ? cuda_runtime::probe().device_count : 0; }

void manual_seed(std::uint64_t value) { seed.store(value, std::memory_order_relaxed); }
std::uint64_t initial_seed() { return seed.load(std::memory_order_relaxed); }

std::size_t memory_allocated(int device) {
  const auto* a = cuda_runtime::allocator_if_used(device);
  return a ? a->stats().allocated : 0;
}
std::size_t max_memory_allocated(int device) {
  const auto* a = cuda_runtime::allocator_if_used(device);
  return a ? a->stats().max_allocated : 0;
}
std::size_t memory_reserved(int device) {
  const auto* a = cuda_runtime::allocator_if_used(device);
  return a ? a->stats().reserved : 0;
}
void reset_peak_memory_stats(int device) {
  if (auto* a = cuda_runtime::allocator_if_used(device)) a->reset_peak();
}
void empty_cache() {
  for (int index = 0; index < device_count(); ++index)
    if (auto* a = cuda_runtime::allocator_if_used(index)) a->empty_cache();
}

}  // namespace kael::cuda
