// Memory-read bandwidth probe: N threads each sum their own contiguous half (third, ...) of a
// buffer far larger than the last-level cache, with 256-bit loads and 4 independent sums, the
// way a decode step streams the weights, on huge pages as kael holds them (KAEL_BANDWIDTH_SMALL_PAGES=1:
// 4 KiB pages). Best of several passes, GB = 1e9 bytes. Prints
//   {"threads", "buffer_mb", "read_gb_s"}
// Usage: bandwidth [threads] [buffer MB, default 1024]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <sys/mman.h>

#include "read_probe.hpp"

constexpr std::size_t kHugePage = std::size_t{2} << 20;

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : static_cast<int>(std::thread::hardware_concurrency());
  const long mb = argc > 2 ? std::atol(argv[2]) : 1024;
  const long n = mb * 1000 * 1000 / 4 / (32L * threads) * (32L * threads);  // floats, divisible per thread
  // On 2 MiB boundaries and in transparent huge pages where the kernel grants them, as kael
  // keeps its weights: in 4 KiB pages every 4 KiB of a stream costs a page walk and the
  // prefetchers stop at each page's end, which reads as a lower bandwidth than the machine has.
  const std::size_t bytes = (static_cast<std::size_t>(n) * 4 + kHugePage - 1) / kHugePage * kHugePage;
  float* buffer = static_cast<float*>(std::aligned_alloc(kHugePage, bytes));
  if (buffer == nullptr) return 1;
#if defined(MADV_HUGEPAGE)
  if (std::getenv("KAEL_BANDWIDTH_SMALL_PAGES") == nullptr) madvise(buffer, bytes, MADV_HUGEPAGE);
#endif
  // Touch each page from the thread that will read it.
  const long per = n / threads;
  {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([=] { std::memset(buffer + t * per, 1, static_cast<std::size_t>(per) * 4); });
    for (auto& t : pool) t.join();
  }
  double best = 0;
  std::vector<float> sink(static_cast<std::size_t>(threads));
  for (int pass = 0; pass < 8; ++pass) {
    std::vector<std::thread> pool;
    const auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { sink[t] = kael::bench::read_sum(buffer + t * per, per); });
    for (auto& t : pool) t.join();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double gbs = static_cast<double>(n) * 4 / dt / 1e9;
    if (gbs > best) best = gbs;
  }
  std::free(buffer);
  std::printf("{\"threads\": %d, \"buffer_mb\": %ld, \"read_gb_s\": %.2f, \"checksum\": %g}\n", threads, mb, best,
              static_cast<double>(sink[0]));
  return 0;
}
