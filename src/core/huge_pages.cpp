#include "core/huge_pages.hpp"

#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace kael {

#if defined(__linux__) && defined(MADV_HUGEPAGE)

std::shared_ptr<void> allocate_huge_aligned(std::size_t bytes) {
  // Whole small pages: a tail short of a huge page stays in small ones rather than waste up to 2 MiB.
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t length = (bytes + page - 1) / page * page;
  if (length == 0 || length < bytes || length > SIZE_MAX - kHugePage) return nullptr;
  // Map one huge page more than needed and cut away the unaligned head and the tail.
  void* raw = mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > start) munmap(raw, aligned - start);
  const std::size_t tail = start + kHugePage - aligned;  // what is left past aligned + length
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + length), tail);
  void* memory = reinterpret_cast<void*>(aligned);
  madvise(memory, length, MADV_HUGEPAGE);  // a hint: without it the pages are 4 KiB
  return std::shared_ptr<void>(memory, [length](void* p) { munmap(p, length); });
}

#else

std::shared_ptr<void> allocate_huge_aligned(std::size_t) { return nullptr; }  // no THP to ask for

#endif

}  // namespace kael
