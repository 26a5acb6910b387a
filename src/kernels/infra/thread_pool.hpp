// The one place that owns worker threads. Kernels split their work with parallel_for; the
// rest of kael never starts a thread for compute.
#pragma once

#include <cstdint>
#include <utility>

#include "kael/core/thread_busy.hpp"

namespace kael::kernels {

// Threads used by parallel_for, the calling thread included. n <= 0 means one per physical
// core (cpu_features.hpp); n above max_threads() is capped to it. Not to be called while a
// kernel is running.
void set_num_threads(int n);
int num_threads();
// kMaxThreadsPerCpu per hardware thread: more threads than that only contend (and
// --threads 10000 would start 10,000 of them).
// kMaxThreads bounds it on any machine (a job's part count is a 16-bit field).
inline constexpr int kMaxThreadsPerCpu = 4;
inline constexpr int kMaxThreads = 4096;
int max_threads();

// Counting of each thread's CPU time inside parallel_for (ThreadBusy), off by default: a
// counted call reads the thread CPU clock twice per thread. Not to be switched while a kernel
// is running. thread_busy() is the total since the program started, over all calls counted.
void count_thread_busy(bool on);
bool counting_thread_busy();
ThreadBusy thread_busy();

// Below about 2^18 multiply-adds (or as much other work) a thread costs more to wake than it
// saves. The one rule for how finely a kernel splits: the fewest items per thread, for items
// of `work_per_item` units each.
inline constexpr std::int64_t kMinThreadWork = std::int64_t{1} << 18;
constexpr std::int64_t min_items_per_thread(std::int64_t work_per_item, std::int64_t min_work = kMinThreadWork) {
  return work_per_item >= min_work ? 1 : min_work / (work_per_item > 0 ? work_per_item : 1);
}

// A product with few rows (decode) is bound by streaming its operand (the weights, or a head's
// cached keys and values), not by its multiply-adds: a thread is worth its wake-up once its
// share has min_work multiply-adds or streams kMinThreadBytes. 64 KiB take a core about 8 us at
// its share of the memory bus, a polling worker about a microsecond to start. By multiply-adds
// alone a (768, 768) F32 decode product went to 2 threads of 16 (docs/performance.md, "Decode
// on 16 cores").
inline constexpr std::int64_t kMinThreadBytes = std::int64_t{1} << 16;
constexpr std::int64_t min_product_items_per_thread(std::int64_t macs_per_item, std::int64_t streamed_bytes_per_item,
                                                    std::int64_t min_work = kMinThreadWork) {
  const std::int64_t by_work = min_items_per_thread(macs_per_item, min_work);
  const std::int64_t by_bytes = min_items_per_thread(streamed_bytes_per_item, kMinThreadBytes);
  return by_work < by_bytes ? by_work : by_bytes;
}

namespace detail {
using RangeFn = void (*)(void* context, std::int64_t begin, std::int64_t end);
void parallel_for(std::int64_t n, std::int64_t min_per_thread, RangeFn fn, void* context);
}  // namespace detail

// Calls fn(begin, end) on disjoint contiguous ranges that cover [0, n), no more ranges than
// threads, and returns when all are done. Ranges are never shorter than min_per_thread (except the
// last), so small jobs stay on the calling thread. The ranges depend only on n, min_per_thread
// and num_threads(); which thread runs which is not fixed (the caller takes the first, a
// worker that is not running takes none, a thread may run several), so fn must not rely on
// ranges running at the same time or on which thread runs them. A call made while the pool is busy (from another thread, or from inside fn) runs
// serially on its caller instead of waiting.
template <class F>
void parallel_for(std::int64_t n, std::int64_t min_per_thread, F&& fn) {
  detail::parallel_for(
      n, min_per_thread,
      [](void* context, std::int64_t begin, std::int64_t end) { (*static_cast<F*>(context))(begin, end); },
      const_cast<void*>(static_cast<const void*>(&fn)));
}

}  // namespace kael::kernels
