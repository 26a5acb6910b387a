// Measures the per-core peaks of the arithmetic the kernels lean on: the single-precision FMA
// with the widest FMA this CPU has (512-bit zmm where the CPU and OS support AVX-512, else
// 256-bit ymm), and the int8 byte dot product of the int8 kernels (AVX512-VNNI or AVX-VNNI
// vpdpbusd, else pmaddubsw + pmaddwd + paddd). Each thread runs 24 (zmm) or 12 (ymm) FMA
// chains and 12 (zmm) or 8 (ymm) dot chains (more than latency x units, so the units never
// wait), one thread per physical core by default, all at once; FMA flops count 2 per lane,
// int8 multiply-adds 1 per byte pair.
// Prints one JSON object:
//   {"isa", "vector_bits", "threads", "gflops", "gflops_per_core", "peak_gflops", "fma_units",
//    "flops_per_cycle", "ghz_estimate", "ghz_from_latency", "peak_per_core_from_latency",
//    "ymm_fmas_per_cycle", "zmm_fmas_per_cycle", "int8_dot", "int8_gmacs_per_core",
//    "int8_peak_gmacs", "int8_dots_per_cycle", "int8_group_dots_per_cycle"}
// gflops is wall-clock (all threads together); gflops_per_core divides each thread's flops by
// its own CPU time (best thread of the best of 3 runs), so it holds on a machine shared with
// other work; peak_gflops = threads x gflops_per_core. The clock comes from a second method:
// ghz_from_latency times one dependent FMA chain (latency 4 cycles), with no assumption about
// the units. From it, ymm_fmas_per_cycle and zmm_fmas_per_cycle say how many FMAs of each width
// a core starts a cycle: 2 and 2 where it has two 512-bit units (Intel server cores), 2 and 1
// where AVX-512 runs on 256-bit units (Zen 4) or on one 512-bit unit. fma_units is that count at
// the measured width, rounded; flops_per_cycle = fma_units x lanes x 2, ghz_estimate = per-core
// flops / flops_per_cycle, and peak_per_core_from_latency = ghz_from_latency x flops_per_cycle:
// a peak the core can reach, which agrees with gflops_per_core when the chains keep the units
// busy. int8_gmacs_per_core is the int8 dot product's multiply-adds per second of CPU time
// (best thread of the best of 3), int8_peak_gmacs that times the threads, int8_dots_per_cycle
// the dot instructions (or pmaddubsw steps) a core starts a cycle at ghz_from_latency: 1.00 on
// a Zen 4 (one zmm vpdpbusd a cycle), a check on the dot loop as
// zmm_fmas_per_cycle is on the FMA one. int8_group_dots_per_cycle (AVX512-VNNI only, else null)
// is the same count for the avx512 int8 GEMM's inner step, where each row's 8 vpdpbusd of a group
// of 32 k come with that group's three float steps (convert, multiply of the two scales, FMA):
// the most of the dot peak that step leaves the GEMM.
// Usage: fma_peak [threads] [seconds] [ymm|zmm]
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kernels/dispatch/cpu_features.hpp"
#include "kael/core/cpu_clock.hpp"

using kael::thread_cpu_seconds;

namespace {

// Independent chains per thread: more than FMA latency (4) x units (2), and as many as the
// registers hold beside the two operands (16 ymm, 32 zmm).
constexpr int kYmmChains = 12, kZmmChains = 24;
// The int8 dot product's chains: more than its latency (4-5) x units (up to 2), and few enough
// that GCC keeps them in registers. With 24 zmm chains GCC 12 copied each vpdpbusd's accumulator
// through other registers and the stack (the instruction overwrites its first operand), and the
// loop ran at half a Zen 4's rate: 116 against 232 G multiply-adds a second with 8 to 16 chains,
// below what kael's own int8 GEMM reached (docs/performance.md, "The int8 dot peak").
// pmaddubsw's chain is only its paddd; the other two steps need registers of their own.
constexpr int kZmmDotChains = 12, kYmmDotChains = 8, kPmaddubswChains = 8;

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

// The int8 dot product's chains: `chains` int32 accumulators, each acc += dot(u, w) of 4 byte
// pairs per lane, `iterations` times; bytes per instruction = lanes x 4. vpdpbusd on zmm or ymm;
// without VNNI the AVX2 step the kernels use: pmaddubsw, pmaddwd by 1, paddd.
#define KAEL_DOT_CHAINS(T, chains, set1, dot, add, to_int)                  \
  T c[chains];                                                              \
  _Pragma("GCC unroll 32") for (int i = 0; i < chains; ++i) c[i] = set1(i); \
  const T u = set1(0x01020304), w = set1(0x05060708);                       \
  for (long n = 0; n < iterations; ++n) {                                   \
    _Pragma("GCC unroll 32") for (int i = 0; i < chains; ++i) c[i] = dot(c[i], u, w); \
  }                                                                         \
  _Pragma("GCC unroll 32") for (int i = 1; i < chains; ++i) c[0] = add(c[0], c[i]); \
  return to_int(c[0]);

template <class T>
int first_lane(const T& v) {  // by reference: a zmm passed by value to a baseline function changes its ABI
  int first;
  std::memcpy(&first, &v, sizeof first);
  return first;
}

__attribute__((target("avx512f,avx512vnni"), noinline)) int zmm_vnni_loop(long iterations) {
  KAEL_DOT_CHAINS(__m512i, kZmmDotChains, _mm512_set1_epi32, _mm512_dpbusd_epi32, _mm512_add_epi32, first_lane)
}

// The avx512 int8 GEMM's step (targets/avx512/int8.cpp, tile) on data that stays in L1: per
// group, 8 rows' sums from zero over 8 k4 blocks (a weight load each, an activation broadcast per
// row), then per row acc += float(sum) * (row scale x column scales). Loads indexed by the
// iteration keep the compiler from hoisting anything out of the loop.
constexpr int kGroupRows = 8, kGroupBlocks = 8;
alignas(64) std::int8_t g_weights[kGroupBlocks * 64];
std::int32_t g_activations[80];
float g_row_scales[32];
alignas(64) float g_column_scales[16];

// (GCC 12 takes _mm512_cvtepi32_ps's deliberately undefined pass-through operand for an
// uninitialized variable inside a target("avx512f") function.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f,avx512vnni"), noinline)) float zmm_group_loop(long iterations) {
  __m512 acc[kGroupRows];
  _Pragma("GCC unroll 8") for (int r = 0; r < kGroupRows; ++r) acc[r] = _mm512_setzero_ps();
  const __m512 column_scales = _mm512_load_ps(g_column_scales);
  for (long n = 0; n < iterations; ++n) {
    const long at = n & 15;
    __m512i sum[kGroupRows];
    _Pragma("GCC unroll 8") for (int r = 0; r < kGroupRows; ++r) sum[r] = _mm512_setzero_si512();
    _Pragma("GCC unroll 8") for (int b = 0; b < kGroupBlocks; ++b) {
      const __m512i w = _mm512_load_si512(g_weights + ((at + b) & (kGroupBlocks - 1)) * 64);
      _Pragma("GCC unroll 8") for (int r = 0; r < kGroupRows; ++r)
        sum[r] = _mm512_dpbusd_epi32(sum[r], _mm512_set1_epi32(g_activations[at + 8 * b + r]), w);
    }
    _Pragma("GCC unroll 8") for (int r = 0; r < kGroupRows; ++r) {
      const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(g_row_scales[at + r]), column_scales);
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[r]), scale, acc[r]);
    }
  }
  _Pragma("GCC unroll 8") for (int r = 1; r < kGroupRows; ++r) acc[0] = _mm512_add_ps(acc[0], acc[r]);
  float first;
  std::memcpy(&first, &acc[0], sizeof first);
  return first;
}
#pragma GCC diagnostic pop

__attribute__((target("avx2,avxvnni"), noinline)) int ymm_vnni_loop(long iterations) {
  KAEL_DOT_CHAINS(__m256i, kYmmDotChains, _mm256_set1_epi32, _mm256_dpbusd_avx_epi32, _mm256_add_epi32,
                  first_lane)
}

__attribute__((target("avx2"))) inline __m256i pmaddubsw_step(__m256i acc, __m256i u, __m256i w) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, w), _mm256_set1_epi16(1)));
}

__attribute__((target("avx2"), noinline)) int pmaddubsw_loop(long iterations) {
  KAEL_DOT_CHAINS(__m256i, kPmaddubswChains, _mm256_set1_epi32, pmaddubsw_step, _mm256_add_epi32, first_lane)
}

// Results land here, so no call can be dropped as unused.
volatile float g_sink;
volatile int g_int_sink;

// Each thread's work per CPU second, at its best: `loop(iterations)` on `threads` threads at
// once, 3 times; returns {wall-clock work per second of all threads, best thread's work per
// CPU second}, with `work` done by one call.
template <class Loop>
std::pair<double, double> run_threads(Loop loop, int threads, long iterations, double work) {
  double best = 0, best_core = 0;
  for (int repeat = 0; repeat < 3; ++repeat) {
    std::vector<std::thread> pool;
    std::vector<double> cpu_seconds(static_cast<std::size_t>(threads));
    const auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        const double start = thread_cpu_seconds();
        loop(iterations);
        cpu_seconds[static_cast<std::size_t>(t)] = thread_cpu_seconds() - start;
      });
    for (auto& t : pool) t.join();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, threads * work / dt);
    for (double s : cpu_seconds) best_core = std::max(best_core, work / s);
  }
  return {best, best_core};
}

// Iterations of `loop` that take about `seconds` of one thread's CPU time.
template <class Loop>
long calibrate(Loop loop, double seconds) {
  long iterations = 1 << 20;
  for (;;) {
    const double t0 = thread_cpu_seconds();
    loop(iterations);
    const double dt = thread_cpu_seconds() - t0;
    if (dt > 0.1) return static_cast<long>(static_cast<double>(iterations) * seconds / dt);
    iterations *= 2;
  }
}

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
  // The F32 FMA at each width this CPU has: GFLOP/s per core (and wall clock, all threads).
  const auto fma_rate = [&](bool wide) {
    const auto loop = [wide](long n) { g_sink = wide ? zmm_loop(n) : ymm_loop(n); };
    const long iterations = calibrate(loop, seconds);
    const double flops = static_cast<double>(iterations) * (wide ? kZmmChains * 16 : kYmmChains * 8) * 2;
    const auto [wall, core] = run_threads(loop, threads, iterations, flops);
    return std::make_pair(wall / 1e9, core / 1e9);
  };
  const auto [ymm_gflops, ymm_core] = fma_rate(false);
  const auto [zmm_gflops, zmm_core] = cpu.avx512f ? fma_rate(true) : std::make_pair(0.0, 0.0);
  // The clock from one dependent chain on this thread (best of 3).
  double ghz_latency = 0;
  const long latency_iterations = calibrate([](long n) { g_sink = latency_loop(n); }, seconds / 3);
  for (int repeat = 0; repeat < 3; ++repeat) {
    const double start = thread_cpu_seconds();
    g_sink = latency_loop(latency_iterations);
    const double s = thread_cpu_seconds() - start;
    ghz_latency = std::max(ghz_latency, static_cast<double>(latency_iterations) * kFmaLatencyCycles / s / 1e9);
  }
  const int lanes = zmm ? 16 : 8;
  const double gflops = zmm ? zmm_gflops : ymm_gflops, core = zmm ? zmm_core : ymm_core;
  const double ymm_per_cycle = ymm_core / (ghz_latency * 8 * 2);
  const double zmm_per_cycle = cpu.avx512f ? zmm_core / (ghz_latency * 16 * 2) : 0.0;
  const int units = std::max(1, static_cast<int>(std::lround(zmm ? zmm_per_cycle : ymm_per_cycle)));
  const int flops_per_cycle = units * lanes * 2;
  // The int8 byte dot product the int8 kernels use on this CPU.
  const bool zmm_dot = cpu.avx512f && cpu.avx512_vnni, ymm_dot = !zmm_dot && cpu.avx_vnni;
  const char* dot = zmm_dot ? "avx512-vnni" : ymm_dot ? "avx-vnni" : "pmaddubsw";
  const auto dot_loop = [zmm_dot, ymm_dot](long n) {
    g_int_sink = zmm_dot ? zmm_vnni_loop(n) : ymm_dot ? ymm_vnni_loop(n) : pmaddubsw_loop(n);
  };
  const long dot_iterations = calibrate(dot_loop, seconds);
  const double macs = static_cast<double>(dot_iterations) *
                      (zmm_dot ? kZmmDotChains * 64 : ymm_dot ? kYmmDotChains * 32 : kPmaddubswChains * 32);
  const double int8_core = run_threads(dot_loop, threads, dot_iterations, macs).second / 1e9;
  const double dots_per_cycle = int8_core / (ghz_latency * (zmm_dot ? 64 : 32));
  char group_dots[32] = "null";
  if (zmm_dot) {
    for (int i = 0; i < kGroupBlocks * 64; ++i) g_weights[i] = static_cast<std::int8_t>(i % 7 - 3);
    for (int i = 0; i < 80; ++i) g_activations[i] = 0x01020304 + i;
    for (int i = 0; i < 16; ++i) g_column_scales[i] = 0.5f + 0.01f * static_cast<float>(i);
    for (int i = 0; i < 32; ++i) g_row_scales[i] = 1e-6f * static_cast<float>(i + 1);
    const auto group_loop = [](long n) { g_sink = zmm_group_loop(n); };
    const long group_iterations = calibrate(group_loop, seconds);
    const double dots = static_cast<double>(group_iterations) * kGroupRows * kGroupBlocks;
    const double per_second = run_threads(group_loop, threads, group_iterations, dots).second;
    std::snprintf(group_dots, sizeof group_dots, "%.2f", per_second / (ghz_latency * 1e9));
  }
  std::printf("{\"isa\": \"%s\", \"vector_bits\": %d, \"threads\": %d, \"gflops\": %.1f, \"gflops_per_core\": %.1f, "
              "\"peak_gflops\": %.1f, \"fma_units\": %d, \"flops_per_cycle\": %d, \"ghz_estimate\": %.2f, "
              "\"ghz_from_latency\": %.2f, \"peak_per_core_from_latency\": %.1f, \"ymm_fmas_per_cycle\": %.2f, "
              "\"zmm_fmas_per_cycle\": %.2f, \"int8_dot\": \"%s\", \"int8_gmacs_per_core\": %.1f, "
              "\"int8_peak_gmacs\": %.1f, \"int8_dots_per_cycle\": %.2f, \"int8_group_dots_per_cycle\": %s}\n",
              zmm ? "avx512" : "avx2", 32 * lanes, threads, gflops, core, core * threads, units, flops_per_cycle,
              core / flops_per_cycle, ghz_latency, ghz_latency * flops_per_cycle, ymm_per_cycle, zmm_per_cycle, dot,
              int8_core, int8_core * threads, dots_per_cycle, group_dots);
  return 0;
}
