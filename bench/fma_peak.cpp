// Measures the machine's single-precision FMA peak with AVX2: each thread runs a loop of
// independent 8-wide FMAs (12 chains, more than latency x throughput, so the FMA units never
// wait) and the flops are counted as 2 per lane. Prints one JSON object:
//   {"threads", "gflops", "gflops_per_core", "peak_gflops", "ghz_estimate"}
// gflops is wall-clock (all threads together); gflops_per_core divides each thread's flops by
// its own CPU time, so it holds on a machine shared with other work; peak_gflops = threads x
// gflops_per_core. ghz_estimate assumes 2 FMA units per core (AMD Zen 3/4/5, Intel since
// Haswell): per-core flops / (2 units x 8 lanes x 2 flops). Usage: fma_peak [threads] [seconds]
#include <immintrin.h>

#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

__attribute__((target("avx2,fma"))) double fma_loop(long iterations) {
  // Twelve named accumulators stay in registers; the empty asm stops the compiler from
  // folding the chains, and costs no instruction.
  __m256 c0 = _mm256_set1_ps(0.1f), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0, c8 = c0,
         c9 = c0, c10 = c0, c11 = c0;
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (long n = 0; n < iterations; ++n) {
    c0 = _mm256_fmadd_ps(c0, a, b);
    c1 = _mm256_fmadd_ps(c1, a, b);
    c2 = _mm256_fmadd_ps(c2, a, b);
    c3 = _mm256_fmadd_ps(c3, a, b);
    c4 = _mm256_fmadd_ps(c4, a, b);
    c5 = _mm256_fmadd_ps(c5, a, b);
    c6 = _mm256_fmadd_ps(c6, a, b);
    c7 = _mm256_fmadd_ps(c7, a, b);
    c8 = _mm256_fmadd_ps(c8, a, b);
    c9 = _mm256_fmadd_ps(c9, a, b);
    c10 = _mm256_fmadd_ps(c10, a, b);
    c11 = _mm256_fmadd_ps(c11, a, b);
    __asm__ volatile("" : "+x"(c0), "+x"(c1), "+x"(c2), "+x"(c3), "+x"(c4), "+x"(c5), "+x"(c6), "+x"(c7), "+x"(c8),
            "+x"(c9), "+x"(c10), "+x"(c11));
  }
  const __m256 sum = _mm256_add_ps(
      _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                    _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7))),
      _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11)));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  return lanes[0];
}

}  // namespace

int main(int argc, char** argv) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    std::fprintf(stderr, "fma_peak: this CPU lacks AVX2 or FMA\n");
    return 1;
  }
  const int threads = argc > 1 ? std::atoi(argv[1]) : static_cast<int>(std::thread::hardware_concurrency());
  const double seconds = argc > 2 ? std::atof(argv[2]) : 1.0;
  long iterations = 1 << 20;
  // Calibrate on one thread so each run lasts about `seconds`.
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    fma_loop(iterations);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (dt > 0.1) {
      iterations = static_cast<long>(iterations * seconds / dt);
      break;
    }
    iterations *= 2;
  }
  const double flops_per_thread = static_cast<double>(iterations) * 12 * 8 * 2;
  double best = 0, best_core = 0;
  for (int repeat = 0; repeat < 3; ++repeat) {
    std::vector<std::thread> pool;
    std::vector<double> cpu_seconds(static_cast<std::size_t>(threads));
    const auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        timespec a{}, b{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
        fma_loop(iterations);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
        cpu_seconds[t] = static_cast<double>(b.tv_sec - a.tv_sec) + 1e-9 * static_cast<double>(b.tv_nsec - a.tv_nsec);
      });
    for (auto& t : pool) t.join();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double gflops = threads * flops_per_thread / dt / 1e9;
    if (gflops > best) best = gflops;
    for (double cpu : cpu_seconds)
      if (flops_per_thread / cpu / 1e9 > best_core) best_core = flops_per_thread / cpu / 1e9;
  }
  std::printf("{\"threads\": %d, \"gflops\": %.1f, \"gflops_per_core\": %.1f, \"peak_gflops\": %.1f, "
              "\"ghz_estimate\": %.2f}\n",
              threads, best, best_core, best_core * threads, best_core / 32.0);
  return 0;
}
