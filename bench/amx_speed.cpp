// Speed of the AMX products (kernels/amx.hpp) beside kael's other linear kernels on GPT-2
// small's four block matrices, on one thread, timed in that thread's CPU time so that the
// figures hold on a machine shared with other work. For each weight type: GFLOP/s at T rows
// (prefill) and GB/s of weights at one row (decode). KAEL_ISA=avx512 times the same formats
// on the AVX-512 GEMVs, without tiles.
// On the amx set it first times the tile unit alone (the bound of the BF16 products): four
// independent TDPBF16PS on resident tiles, then the same with the four tile loads of a 2 x 2
// block step from 32 KiB that stays in L1 (and again at the end: on a shared host the tiles' rate
// can halve from one second to the next, so a figure is worth comparing only with the probe of
// the same run). Last, the BF16 tile product of GPT-2's first MLP
// matrix (768, 3072) split over two threads by columns, as bf16_linear splits it, timed call by
// call in each thread's CPU time: the calls during which the other thread was computing too
// against those it ran alone, which shows whether two cores slow each other down (shared
// caches, memory, the tile unit of a shared physical core).
// Usage: amx_speed [T (default 512)] [repeats (default 3)]
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "kernels/infra/aligned_vector.hpp"
#include "kernels/amx.hpp"
#if defined(__x86_64__)
#include "kernels/targets/amx/kernels.hpp"
#endif
#include "kernels/dispatch/cpu_features.hpp"
#include "kernels/gemm.hpp"
#include "kernels/int8.hpp"
#include "kernels/dispatch/kernel_table.hpp"
#include "kernels/quant.hpp"
#include "kernels/infra/thread_pool.hpp"
#include "kael/core/cpu_clock.hpp"

using namespace kael::kernels;

using kael::thread_cpu_seconds;

namespace {

struct Shape {
  std::int64_t K, N;
};
const Shape kShapes[] = {{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}};

// Best of `repeats` CPU times of fn(T) over the four shapes.
double best_seconds(const std::function<void(const Shape&, std::size_t, std::int64_t)>& fn, std::int64_t T,
                    int repeats) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const double start = thread_cpu_seconds();
    for (std::size_t i = 0; i < 4; ++i) fn(kShapes[i], i, T);
    best = std::min(best, thread_cpu_seconds() - start);
  }
  return best;
}

#if defined(__x86_64__)
// GFLOP/s of `steps` 2 x 2 block steps (four TDPBF16PS, 16 x 16 x 32 each), best of 50 runs in CPU
// time; with `loads`, each step first loads its four tiles (1 KiB each) from `l1` (32 KiB).
__attribute__((target("amx-tile,amx-bf16"))) double tile_step_gflops(const std::uint16_t* l1, bool loads) {
  constexpr long kSteps = 20000;
  const amx::AmxTiles hold;
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, l1, 64);
  _tile_loadd(5, l1, 64);
  _tile_loadd(6, l1, 64);
  _tile_loadd(7, l1, 64);
  double best = 1e30;
  for (int run = 0; run < 50; ++run) {
    const double start = thread_cpu_seconds();
    for (long i = 0; i < kSteps; ++i) {
      if (loads) {
        const std::uint16_t* q = l1 + (i % 8) * 2048;
        _tile_loadd(4, q, 64);
        _tile_loadd(5, q + 512, 64);
        _tile_loadd(6, q + 1024, 64);
        _tile_loadd(7, q + 1536, 64);
      }
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
    best = std::min(best, thread_cpu_seconds() - start);
  }
  return kSteps * 4 * 2.0 * 16 * 16 * 32 / best * 1e-9;
}

void print_tile_peak() {
  if (active_isa() != Isa::amx || !cpu_features().amx_bf16) return;
  std::vector<std::uint16_t> buffer(16384 + 32, 0x3f80);  // BF16 1.0
  const auto* l1 = reinterpret_cast<const std::uint16_t*>((reinterpret_cast<std::uintptr_t>(buffer.data()) + 63) / 64 * 64);
  std::printf("AMX-BF16 tile unit: %.0f GFLOP/s on resident tiles, %.0f with the 2 x 2 step's tile loads from L1\n",
              tile_step_gflops(l1, false), tile_step_gflops(l1, true));
}
// Each thread's calls of its half of the product, split by whether the other thread was
// computing for the whole call (started before it and not yet done after it) or not at all.
struct CallRates {
  double together_flops = 0, together_seconds = 0, alone_flops = 0, alone_seconds = 0;
};

double wall_seconds() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

void print_two_thread_rate(std::int64_t T) {
  if (active_isa() != Isa::amx || !cpu_features().amx_bf16) return;
  constexpr std::int64_t K = 768, N = 3072, kCopies = 4;  // copies: the weights come from beyond L2
  const std::int64_t Kp = bf16_padded_k(K), half = N / 32 / 2;
  std::vector<float> w(static_cast<std::size_t>(K * N));
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(static_cast<int>(i % 13) - 6);
  std::vector<AlignedVector<std::uint16_t>> weights(kCopies);
  for (auto& copy : weights) {
    copy.resize(static_cast<std::size_t>(bf16_matrix_elements(K, N)));
    convert_bf16_tiles(copy.data(), w.data(), K, N, false);
  }
  AlignedVector<std::uint16_t> a(static_cast<std::size_t>(round_up(T, 32) * Kp));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<std::uint16_t>(0x3c00 + i % 251);
  std::vector<float> c(static_cast<std::size_t>(T * N));
  std::atomic<bool> computing[2] = {false, false};
  CallRates rates[2];
  const double flops = 2.0 * static_cast<double>(T * K * 32 * half);
  auto run = [&](int id, double seconds) {
    const std::int64_t first = id * half;
    const double end = wall_seconds() + seconds;
    for (std::int64_t call = 0; wall_seconds() < end; ++call) {
      computing[id] = true;
      const bool before = computing[1 - id];
      const double start = thread_cpu_seconds(), start_wall = wall_seconds();
      active_kernels().gemm_bf16(c.data() + first * 32, N, a.data(), T, Kp,
                                 weights[call % kCopies].data() + first * 32 * Kp, half, N - first * 32, nullptr,
                                 Epilogue::store);
      const double cpu = thread_cpu_seconds() - start, elapsed = wall_seconds() - start_wall;
      const bool after = computing[1 - id];
      computing[id] = false;
      if (cpu < 0.9 * elapsed) continue;  // descheduled during the call: neither
      if (before && after) {
        rates[id].together_flops += flops, rates[id].together_seconds += cpu;
      } else if (!before && !after) {
        rates[id].alone_flops += flops, rates[id].alone_seconds += cpu;
        std::this_thread::yield();  // let the other thread catch up
      }
    }
  };
  run(0, 1.0);  // alone, for a reference on the same thread
  std::thread other(run, 1, 2.0);
  run(0, 2.0);
  other.join();
  auto rate = [](double f, double s) { return s > 0 ? f / s * 1e-9 : 0.0; };
  std::printf("bf16 (768, 3072) split over 2 threads, T = %lld, GFLOP/s per thread-CPU-s: alone %.0f (%.2f s), "
              "both computing %.0f and %.0f (%.2f s, %.2f s)\n",
              static_cast<long long>(T), rate(rates[0].alone_flops, rates[0].alone_seconds), rates[0].alone_seconds,
              rate(rates[0].together_flops, rates[0].together_seconds),
              rate(rates[1].together_flops, rates[1].together_seconds), rates[0].together_seconds,
              rates[1].together_seconds);
}
#else
void print_tile_peak() {}
void print_two_thread_rate(std::int64_t) {}
#endif

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t T = argc > 1 ? std::atoll(argv[1]) : 512;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 3;
  set_num_threads(1);
  std::string why = "usable";
  isa_supported(Isa::amx, &why);
  std::printf("isa %s (KAEL_ISA); AMX: %s; AVX512-BF16 %s, AVX512-VNNI %s; 1 thread, CPU time; T = %lld\n",
              isa_name(active_isa()), why.c_str(), cpu_features().avx512_bf16 ? "yes" : "no",
              cpu_features().avx512_vnni ? "yes" : "no", static_cast<long long>(T));
  print_tile_peak();
  std::vector<std::vector<float>> f32;
  std::vector<std::vector<std::int8_t>> q8;
  std::vector<std::vector<std::uint16_t>> s8, bf16;
  std::vector<std::vector<std::uint8_t>> c8;
  double flops_per_row = 0, f32_bytes = 0, q8_bytes = 0, bf16_bytes = 0, c8_bytes = 0;
  for (const Shape& s : kShapes) {
    std::vector<float> w(static_cast<std::size_t>(s.K * s.N));
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(static_cast<int>(i % 17) - 8);
    flops_per_row += 2.0 * static_cast<double>(s.K * s.N);
    f32.emplace_back(w.size());
    pack_panels(f32.back().data(), w.data(), s.K, s.N);
    q8.emplace_back(static_cast<std::size_t>(int8_weight_bytes(s.K, s.N)));
    s8.emplace_back(static_cast<std::size_t>(int8_scale_count(s.K, s.N)));
    quantize_int8_panels(q8.back().data(), s8.back().data(), w.data(), s.K, s.N, false);
    bf16.emplace_back(static_cast<std::size_t>(bf16_matrix_elements(s.K, s.N)));
    convert_bf16_tiles(bf16.back().data(), w.data(), s.K, s.N, false);
    c8.emplace_back(static_cast<std::size_t>(int8c_matrix_bytes(s.K, s.N)));
    quantize_int8c(c8.back().data(), w.data(), s.K, s.N, false);
    f32_bytes += 4.0 * static_cast<double>(w.size());
    q8_bytes += static_cast<double>(q8.back().size() + 2 * s8.back().size());
    bf16_bytes += 2.0 * static_cast<double>(bf16.back().size());
    c8_bytes += static_cast<double>(c8.back().size());
  }
  std::vector<float> x(static_cast<std::size_t>(T * 3072), 0.5f), y(static_cast<std::size_t>(T * 3072));
  struct Kernel {
    const char* name;
    double bytes;
    std::function<void(const Shape&, std::size_t, std::int64_t)> run;
  };
  const Kernel kernels[] = {
      {"f32 (active isa)", f32_bytes,
       [&](const Shape& s, std::size_t i, std::int64_t t) {
         linear_packed(y.data(), x.data(), f32[i].data(), nullptr, t, s.K, s.N);
       }},
      {"int8, per-32 groups", q8_bytes,
       [&](const Shape& s, std::size_t i, std::int64_t t) {
         int8_linear(y.data(), x.data(), q8[i].data(), s8[i].data(), nullptr, t, s.K, s.N);
       }},
      {"int8, per column (amx.hpp)", c8_bytes,
       [&](const Shape& s, std::size_t i, std::int64_t t) {
         int8c_linear(y.data(), x.data(), c8[i].data(), nullptr, t, s.K, s.N);
       }},
      {"bf16 (amx.hpp)", bf16_bytes,
       [&](const Shape& s, std::size_t i, std::int64_t t) {
         bf16_linear(y.data(), x.data(), bf16[i].data(), nullptr, t, s.K, s.N);
       }},
  };
  std::printf("%-28s %14s %14s\n", "weights", "GFLOP/s at T", "GB/s at T=1");
  for (const Kernel& k : kernels) {
    const bool bf16 = k.name[0] == 'b', per_column = std::string(k.name).find("per column") != std::string::npos;
    if ((bf16 && !(cpu_features().avx512_bf16 && active_isa() >= Isa::avx512)) || (per_column && !int8_per_column())) {
      std::printf("%-28s skipped: needs %s\n", k.name, bf16 ? "AVX512-BF16 and KAEL_ISA avx512 or amx" : "the amx set");
      continue;
    }
    const double prefill = best_seconds(k.run, T, repeats);
    const double decode = best_seconds(k.run, 1, repeats * 4);
    std::printf("%-28s %14.1f %14.1f\n", k.name, flops_per_row * static_cast<double>(T) / prefill * 1e-9,
                k.bytes / decode * 1e-9);
  }
  print_two_thread_rate(T);
  print_tile_peak();  // again: the host can change the tiles' rate during the run (docs/performance.md)
  return 0;
}
