// A std::vector whose storage starts on a cache line. The AMX tile loads read 64-byte rows: from
// a buffer 16 bytes past a line (where malloc puts a large block) every row spans two lines, and
// bench/amx_speed's BF16 product ran at about half speed on such scratch.
#pragma once

#include <cstddef>
#include <new>
#include <utility>
#include <vector>

namespace kael::kernels {

inline constexpr std::size_t kCacheLine = 64;

template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}  // NOLINT: rebinding, as std::allocator
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kCacheLine}));
  }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t{kCacheLine}); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

// As CacheLineAllocator, but resize() leaves new elements of a trivial type uninitialized
// instead of zeroing them: for scratch that every call overwrites before reading. A vector
// value-initializes what resize() adds, even inside its capacity, so a thread_local buffer
// that alternates between a small and a large product would be zeroed, up to megabytes, on
// every call that grows it.
template <class T>
struct ScratchAllocator : CacheLineAllocator<T> {
  using value_type = T;
  ScratchAllocator() = default;
  template <class U>
  ScratchAllocator(const ScratchAllocator<U>&) noexcept {}  // NOLINT: rebinding, as std::allocator
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    if constexpr (sizeof...(Args) == 0)
      ::new (static_cast<void*>(p)) U;  // default-initialized: no zeroing
    else
      ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

// Scratch on cache lines whose resize() does not zero (ScratchAllocator); the caller writes
// every element it reads.
template <class T>
using ScratchVector = std::vector<T, ScratchAllocator<T>>;

}  // namespace kael::kernels
