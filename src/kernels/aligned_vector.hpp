// A std::vector whose storage starts on a cache line. The AMX tile loads read 64-byte rows: from
// a buffer 16 bytes past a line (where malloc puts a large block) every row spans two lines, and
// bench/amx_speed's BF16 product ran at about half speed on such scratch.
#pragma once

#include <cstddef>
#include <new>
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

}  // namespace kael::kernels
