// Large buffers (tensors of 2 MiB or more, such as weights converted at load, and KV block slabs)
// on 2 MiB boundaries with transparent huge pages asked for (madvise): in 4 KiB pages they cost a
// page fault per 4 KiB when first touched and a TLB miss every 4 KiB, and under a hypervisor's
// nested paging each miss walks two page tables. (Weights used straight from a file mapping are
// packed in place and stay in the mapping's pages: see pack_matrix in src/model/weights.cpp.)
#pragma once

#include <cstddef>
#include <memory>

namespace kael {

inline constexpr std::size_t kHugePage = std::size_t{2} << 20;

// Zeroed memory of `bytes` (whole small pages) starting on a 2 MiB boundary, mapped privately
// and marked MADV_HUGEPAGE (a hint: where the kernel declines, the pages are ordinary ones).
// Null where the mapping fails or the system has no transparent huge pages, so the caller can
// fall back to its usual allocator.
std::shared_ptr<void> allocate_huge_aligned(std::size_t bytes);

}  // namespace kael
