// The caching allocator behind CUDA tensors, one per device, written against a small backend
// (the device's malloc and free) so that its bookkeeping is tested on every machine with a fake
// one (tests/core_device_allocator_test.cpp).
//
// Why a cache: cudaMalloc and cudaFree synchronize the device and cost tens of microseconds;
// an op's outputs come and go in the same sizes every step. Freed blocks stay here, keyed by
// their rounded size, for the next request of that size; empty_cache() returns them. Sizes are
// rounded up (512 bytes below 1 MiB, 2 MiB above) so that near sizes share blocks. All work is
// queued on one stream per device, so a block freed here is reused only by work queued after
// the work that used it.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace kael::device_memory {

class Backend {
 public:
  virtual ~Backend() = default;
  // `bytes` of device memory, or nullptr when the device has not that much free.
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void release(void* block) = 0;
  // "cuda:0": for error messages.
  virtual std::string name() const = 0;
};

struct Stats {
  std::size_t allocated = 0;      // bytes in blocks held by live tensors (rounded sizes)
  std::size_t max_allocated = 0;  // the peak of `allocated`
  std::size_t reserved = 0;       // bytes taken from the backend: live and cached blocks
};

// The size a request of `bytes` is served with.
std::size_t rounded_size(std::size_t bytes);

class CachingAllocator {
 public:
  explicit CachingAllocator(std::unique_ptr<Backend> backend) : backend_(std::move(backend)) {}
  ~CachingAllocator();  // releases the cached blocks (live ones must be gone by then)
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes`, returned here when the last owner lets go. When the backend is
  // out of memory the cache is emptied and the request tried once more; then an Error names the
  // size and what this allocator holds.
  std::shared_ptr<void> allocate(std::size_t bytes);
  void empty_cache();
  Stats stats() const;
  void reset_peak();

 private:
  void give_back(void* block, std::size_t size);
  void release_cached_locked();

  std::unique_ptr<Backend> backend_;
  mutable std::mutex mutex_;
  std::multimap<std::size_t, void*> cached_;  // free blocks by rounded size
  Stats stats_;
};

}  // namespace kael::device_memory
