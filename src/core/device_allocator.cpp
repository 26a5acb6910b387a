#include "core/device_allocator.hpp"

#include <vector>

#include "kael/core/error.hpp"

namespace kael::device_memory {

namespace {
constexpr std::size_t kSmallRounding = 512;
constexpr std::size_t kLargeThreshold = std::size_t{1} << 20;
constexpr std::size_t kLargeRounding = std::size_t{2} << 20;

std::size_t round_up(std::size_t bytes, std::size_t multiple) {
  const std::size_t blocks = bytes / multiple + (bytes % multiple != 0);
  std::size_t out;
  if (!checked_mul(blocks, multiple, out)) throw Error(str("device allocation of ", bytes, " bytes is too large"));
  return out;
}
}  // namespace

std::size_t rounded_size(std::size_t bytes) {
  if (bytes == 0) return kSmallRounding;  // a tensor of no elements still owns a distinct block
  return bytes < kLargeThreshold ? round_up(bytes, kSmallRounding) : round_up(bytes, kLargeRounding);
}

CachingAllocator::~CachingAllocator() {
  const std::lock_guard lock(mutex_);
  release_cached_locked();
}

std::shared_ptr<void> CachingAllocator::allocate(std::size_t bytes) {
  const std::size_t size = rounded_size(bytes);
  void* block = nullptr;
  {
    const std::lock_guard lock(mutex_);
    if (const auto it = cached_.find(size); it != cached_.end()) {
      block = it->second;
      cached_.erase(it);
    } else {
      block = backend_->allocate(size);
      if (block == nullptr && !cached_.empty()) {  // the cache may hold what the device lacks
        release_cached_locked();
        block = backend_->allocate(size);
      }
      if (block == nullptr)
        throw Error(str("out of memory on ", backend_->name(), ": could not allocate ", bytes, " bytes (tensors hold ",
                        stats_.allocated, " bytes there)"));
      stats_.reserved += size;
    }
    stats_.allocated += size;
    if (stats_.allocated > stats_.max_allocated) stats_.max_allocated = stats_.allocated;
  }
  return std::shared_ptr<void>(block, [this, size](void* p) { give_back(p, size); });
}

void CachingAllocator::give_back(void* block, std::size_t size) {
  const std::lock_guard lock(mutex_);
  stats_.allocated -= size;
  cached_.emplace(size, block);
}

void CachingAllocator::release_cached_locked() {
  for (const auto& [size, block] : cached_) {
    backend_->release(block);
    stats_.reserved -= size;
  }
  cached_.clear();
}

void CachingAllocator::empty_cache() {
  const std::lock_guard lock(mutex_);
  release_cached_locked();
}

Stats CachingAllocator::stats() const {
  const std::lock_guard lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  const std::lock_guard lock(mutex_);
  stats_.max_allocated = stats_.allocated;
}

}  // namespace kael::device_memory
