// Elementwise ops and reductions split over the kernel table's thread pool
// (kernels/infra/thread_pool.hpp) by index range, with the pool's one rule for how finely.
#pragma once

#include <cstdint>
#include <utility>

#include "kernels/infra/thread_pool.hpp"

namespace kael::tensor_detail {

// Calls body(begin, end) on disjoint ranges covering [0, n), on several of the pool's threads
// when n items of `work_per_item` units (about one multiply-add each) are worth waking them
// for, otherwise once on the caller. Each item must be computed the same way whatever range
// it falls in, so that the split never changes a result.
template <class F>
void parallel_range(std::int64_t n, std::int64_t work_per_item, F&& body) {
  if (n <= 0) return;
  kernels::parallel_for(n, kernels::min_items_per_thread(work_per_item), std::forward<F>(body));
}

}  // namespace kael::tensor_detail
