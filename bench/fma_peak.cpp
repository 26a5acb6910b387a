// Measures the per-core single-precision FMA peak with the widest FMA this CPU has: 512-bit
// zmm where the CPU and OS support AVX-512 (kernels' detector), else 256-bit ymm. Each thread
// runs 24 (zmm) or 12 (ymm) independent FMA chains (more than latency 4 x 2 FMA units, so the
// units never wait), one thread per physical core by default, all at once; flops count 2 per lane.
// Prints one JSON object:
//   {"isa", "vector_bits", "threads", "gflops", "gflops_per_core", "peak_gflops", "ghz_estimate"}
// gflops is wall-clock (all threads together); gflops_per_core divides each thread's flops by
// its own CPU time (best thread of the best of 3 runs), so it holds on a machine shared with
// other work; peak_gflops = threads x gflops_per_core. ghz_estimate assumes 2 FMA units per
// core: per-core flops / (2 units x lanes x 2 flops). The check: ghz_from_latency times one
// dependent FMA chain (latency 4 cycles), which gives the clock without counting units, and
// peak_per_core_from_latency = that clock x 2 units x lanes x 2; the two estimates agree when
// the chains keep both units busy.
// Usage: fma_peak [threads] [seconds] [ymm|zmm]
#include <immintrin.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu_features.hpp"
#include "kael/core/cpu_clock.hpp"

using kael::thread_cpu_seconds;

namespace {

// Independent chains per thread: more than FMA latency (4) x units (2), and as many as the
// registers hold beside the two operands (16 ymm, 32 zmm).
constexpr int kYmmChains = 12, kZmmChains = 24;

// `chains` accumulators, each c = c * a + b, `iterations` times. Without -ffast-math the
// compiler may not shorten a chain, and distinct starting values keep it from merging two;
// fully unrolled, the array lives in registers.
#define KAEL_FMA_CHAINS(T, chains, set1, fma, add)                 \
  T c[chains];                                                     \
  _Pragma("GCC unroll 32") for (int i = 0; i < chains; ++i) c[i] = set1(0.1f + 0.001f * i); \
  const T a = set1(0.999999f), b = set1(1e-7f);                    \
  for (long n = 0; n < iterations; ++n) {                          \
    _Pragma("GCC unroll 32") for (int i = 0; i < chains; ++i) c[i] = fma(c[i], a, b); \
  }                                                                \
  _Pragma("GCC unroll 32") for (int i = 1; i < chains; ++i) c[0] = add(c[0], c[i]); \
  float first;                                                     \
  std::memcpy(&first, &c[0], sizeof first);                        \
  return first;

__attribute__((target("avx2,fma"), noinline)) float ymm_loop(long iterations) {
  KAEL_FMA_CHAINS(__m256, kYmmChains, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps)
}

__attribute__((target("avx512f"), noinline)) float zmm_loop(long iterations) {
  KAEL_FMA_CHAINS(__m512, kZmmChains, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps)
}

// One chain: each FMA waits for the one before, so an iteration takes the FMA latency (4
// cycles on every x86 core with 2 FMA units since Skylake and Zen 2). The second method: it
// gives the clock with no assumption about the number of units.
__attribute__((target("avx2,fma"), noinline)) float latency_loop(long iterations) {
  KAEL_FMA_CHAINS(__m256, 1, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps)
}
constexpr double kFmaLatencyCycles = 4.0;

// Results land here, so no call can be dropped as unused.
volatile float g_sink;

}  // namespace

int main(int argc, char** argv) {
  using namespace kael::kernels;
  const CpuFeatures& cpu = cpu_features();
  if (!cpu.avx2 || !cpu.fma) {
    std::fprintf(stderr, "fma_peak: this CPU lacks AVX2 or FMA\n");
    return 1;
  }
  const int threads = argc > 1 ? std::atoi(argv[1]) : physical_cores();
  const double seconds = argc > 2 ? std::atof(argv[2]) : 1.0;
  bool zmm = cpu.avx512f;
  if (argc > 3) zmm = std::string(argv[3]) == "zmm";
  if (zmm && !cpu.avx512f) {
    std::fprintf(stderr, "fma_peak: this CPU (or its OS) lacks AVX-512\n");
    return 1;
  }
  const int lanes = zmm ? 16 : 8;
  const auto loop = zmm ? zmm_loop : ymm_loop;
  long iterations = 1 << 20;
  // Calibrate on one thread so each run lasts about `seconds` of CPU time.
  for (;;) {
    const double t0 = thread_cpu_seconds();
    g_sink = loop(iterations);
    const double dt = thread_cpu_seconds() - t0;
    if (dt > 0.1) {
      iterations = static_cast<long>(static_cast<double>(iterations) * seconds / dt);
      break;
    }
    iterations *= 2;
  }
  const double flops_per_thread = static_cast<double>(iterations) * (zmm ? kZmmChains : kYmmChains) * lanes * 2;
  double best = 0, best_core = 0;
  for (int repeat = 0; repeat < 3; ++repeat) {
    std::vector<std::thread> pool;
    std::vector<double> cpu_seconds(static_cast<std::size_t>(threads));
    const auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        const double start = thread_cpu_seconds();
        g_sink = loop(iterations);
        cpu_seconds[static_cast<std::size_t>(t)] = thread_cpu_seconds() - start;
      });
    for (auto& t : pool) t.join();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double gflops = threads * flops_per_thread / dt / 1e9;
    if (gflops > best) best = gflops;
    for (double s : cpu_seconds)
      if (flops_per_thread / s / 1e9 > best_core) best_core = flops_per_thread / s / 1e9;
  }
  // The clock from one dependent chain on this thread (best of 3).
  double ghz_latency = 0;
  for (int repeat = 0; repeat < 3; ++repeat) {
    const long n = iterations * 4;
    const double start = thread_cpu_seconds();
    g_sink = latency_loop(n);
    const double s = thread_cpu_seconds() - start;
    if (static_cast<double>(n) * kFmaLatencyCycles / s / 1e9 > ghz_latency)
      ghz_latency = static_cast<double>(n) * kFmaLatencyCycles / s / 1e9;
  }
  std::printf("{\"isa\": \"%s\", \"vector_bits\": %d, \"threads\": %d, \"gflops\": %.1f, \"gflops_per_core\": %.1f, "
              "\"peak_gflops\": %.1f, \"ghz_estimate\": %.2f, \"ghz_from_latency\": %.2f, "
              "\"peak_per_core_from_latency\": %.1f}\n",
              zmm ? "avx512" : "avx2", 32 * lanes, threads, best, best_core, best_core * threads,
              best_core / (2.0 * lanes * 2), ghz_latency, ghz_latency * 2 * lanes * 2);
  return 0;
}
