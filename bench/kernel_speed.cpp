// Speed of the linear kernels on GPT-2 small's shapes, per instruction set and weight type:
// GEMV (decode, one row, reported as GB/s of weights streamed), and GEMM (T rows, GFLOP/s).
// Both wall-clock and per-CPU-second figures are printed, the latter holds on a machine shared
// with other work. Then, at T = 512 (a prefill), each shape on its own and the causal attention
// of the 12 heads, in GFLOP/s per CPU-second (the attention counted by its useful, causal half).
// Usage: kernel_speed [threads] [isa: scalar|avx2|avx512|amx] [dtype: f32|f16|int8] [rows]
// With `rows` only the per-shape and attention lines run, at that many rows (the model's prefill
// runs its prompt in chunks of 256 rows, attending to up to 512 positions in the second).
// (int8 uses VNNI where the CPU has it; KAEL_VNNI=0 times the pmaddubsw kernel instead.)
// The weights lie one after another on huge pages, as kael's loader holds them;
// KAEL_BANDWIDTH_SMALL_PAGES=1 (as for bench/bandwidth) puts them on 4 KiB pages instead.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/huge_pages.hpp"
#include "kael/core/cpu_clock.hpp"
#include "kernels/attention.hpp"
#include "kernels/dispatch/cpu_features.hpp"
#include "kernels/gemm.hpp"
#include "kernels/int8.hpp"
#include "kernels/quant.hpp"
#include "kernels/infra/thread_pool.hpp"

using namespace kael::kernels;

namespace {

double cpu_now() { return kael::process_cpu_seconds(); }
double wall_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : physical_cores();
  if (argc > 2) {
    bool known = false;
    for (Isa isa : kAllIsas)
      if (std::string(argv[2]) == isa_name(isa)) {
        set_isa(isa);
        known = true;
      }
    if (!known) {
      std::fprintf(stderr, "error: unknown instruction set '%s' (scalar, avx2, avx512 or amx)\n", argv[2]);
      return 2;
    }
  }
  const std::string dtype = argc > 3 ? argv[3] : "f32";
  const std::int64_t prefill_rows = argc > 4 ? std::atol(argv[4]) : 0;
  if (argc > 4 && (prefill_rows < 1 || prefill_rows > 512)) {
    std::fprintf(stderr, "error: rows must be 1 to 512, got '%s'\n", argv[4]);
    return 2;
  }
  set_num_threads(threads);
  // One GPT-2 small layer's four matrices, 12 times over: 340 MB in F32, far beyond the caches.
  const std::int64_t C = 768, layers = 12;
  const std::int64_t shapes[4][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}};
  // Every matrix in one buffer, in the order a decode step streams them.
  const auto matrix_bytes = [&](std::int64_t K, std::int64_t N) -> std::int64_t {
    if (dtype == "int8") return int8_weight_bytes(K, N) + 2 * int8_scale_count(K, N);
    return (dtype == "f16" ? 2 : 4) * K * N;
  };
  std::int64_t arena_bytes = 0;
  for (std::int64_t l = 0; l < layers; ++l)
    for (auto& s : shapes) arena_bytes += (matrix_bytes(s[0], s[1]) + 63) / 64 * 64;
  const bool small_pages = std::getenv("KAEL_BANDWIDTH_SMALL_PAGES") != nullptr;
  std::shared_ptr<void> arena =
      small_pages ? nullptr : kael::allocate_huge_aligned(static_cast<std::size_t>(arena_bytes));
  if (!arena) arena = std::shared_ptr<void>(std::aligned_alloc(64, static_cast<std::size_t>(arena_bytes)), std::free);
  auto* next = static_cast<std::uint8_t*>(arena.get());
  const auto take = [&](std::int64_t bytes) {
    void* p = next;
    next += (bytes + 63) / 64 * 64;
    return p;
  };
  std::vector<PackedMatrix> matrices;
  double bytes = 0, flops_per_row = 0;
  for (std::int64_t l = 0; l < layers; ++l)
    for (auto& s : shapes) {
      const std::int64_t K = s[0], N = s[1];
      std::vector<float> w(static_cast<std::size_t>(K * N));
      for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(static_cast<int>(i % 17) - 8);
      flops_per_row += 2.0 * static_cast<double>(K * N);
      bytes += static_cast<double>(matrix_bytes(K, N));
      if (dtype == "int8") {
        auto* q = static_cast<std::int8_t*>(take(int8_weight_bytes(K, N)));
        auto* scales = static_cast<std::uint16_t*>(take(2 * int8_scale_count(K, N)));
        quantize_int8_panels(q, scales, w.data(), K, N, false);
        matrices.push_back({kael::WeightDType::int8, q, scales});
      } else if (dtype == "f16") {
        auto* h = static_cast<std::uint16_t*>(take(2 * K * N));
        convert_f16_panels(h, w.data(), K, N, false);
        matrices.push_back({kael::WeightDType::f16, h, nullptr});
      } else {
        auto* f = static_cast<float*>(take(4 * K * N));
        pack_panels(f, w.data(), K, N);
        matrices.push_back({kael::WeightDType::f32, f, nullptr});
      }
    }
  std::vector<float> bias(4 * C, 0.0f), inp(512 * 4 * C, 0.5f), out(512 * 4 * C);
  std::printf("isa %s, threads %d, %s weights %.0f MB%s%s\n", isa_name(active_isa()), threads, dtype.c_str(),
              bytes / 1e6, dtype == "int8" ? ", int8 dot " : "", dtype == "int8" ? int8_dot_name() : "");
  for (std::int64_t T : {1, 2, 4, 16, 64, 128, 256, 512}) {
    if (prefill_rows > 0) break;
    double best_wall = 1e30, best_cpu = 1e30;
    for (int repeat = 0; repeat < (T <= 16 ? 10 : 3); ++repeat) {
      const double w0 = wall_now(), c0 = cpu_now();
      for (std::size_t i = 0; i < matrices.size(); ++i) {
        const auto& s = shapes[i % 4];
        linear_matrix(out.data(), inp.data(), matrices[i], bias.data(), T, s[0], s[1]);
      }
      const double w = wall_now() - w0, c = cpu_now() - c0;
      if (w < best_wall) best_wall = w;
      if (c < best_cpu) best_cpu = c;
    }
    const double flops = flops_per_row * static_cast<double>(T);
    std::printf("T=%4ld  %8.2f ms  %7.1f GB/s  %7.1f GFLOP/s wall  %7.1f GFLOP/s per core (cpu time)\n",
                static_cast<long>(T), best_wall * 1e3, bytes / best_wall / 1e9, flops / best_wall / 1e9,
                flops / best_cpu / 1e9);
  }
  const std::int64_t T = prefill_rows > 0 ? prefill_rows : 512;
  for (int s = 0; s < 4; ++s) {
    const std::int64_t K = shapes[s][0], N = shapes[s][1];
    double best_cpu = 1e30;
    for (int repeat = 0; repeat < 3; ++repeat) {
      const double c0 = cpu_now();
      for (std::size_t i = static_cast<std::size_t>(s); i < matrices.size(); i += 4)
        linear_matrix(out.data(), inp.data(), matrices[i], bias.data(), T, K, N);
      best_cpu = std::min(best_cpu, cpu_now() - c0);
    }
    std::printf("T=%ld  %ldx%ld  %7.1f GFLOP/s per core (cpu time)\n", static_cast<long>(T), static_cast<long>(K),
                static_cast<long>(N), 2.0 * static_cast<double>(T * K * N * layers) / best_cpu / 1e9);
  }
  // Attention over a cache holding the T positions, as prefill runs it.
  const std::int64_t heads = 12, head_dim = 64, cap = kv_capacity(T);
  std::vector<float> k_layer(static_cast<std::size_t>(kv_layer_floats(heads, head_dim, T)), 0.01f);
  std::vector<float> v_layer(k_layer.size(), 0.02f), qkv(static_cast<std::size_t>(T * 3 * C), 0.03f);
  std::vector<float> scores(static_cast<std::size_t>(attention_scratch_size(T, 0, heads))), att(T * C);
  double best_cpu = 1e30;
  for (int repeat = 0; repeat < 3; ++repeat) {
    const double c0 = cpu_now();
    for (std::int64_t l = 0; l < layers; ++l)
      cached_attention(att.data(), scores.data(), qkv.data(), 3 * C, k_layer.data(), v_layer.data(), T, 0, heads,
                       head_dim, cap);
    best_cpu = std::min(best_cpu, cpu_now() - c0);
  }
  const double causal_flops = 4.0 * static_cast<double>(heads * head_dim) * static_cast<double>(T * (T + 1) / 2);
  std::printf("T=%ld  attention %ldx%ld  %7.1f GFLOP/s per core (cpu time), %.2f ms per layer\n",
              static_cast<long>(T), static_cast<long>(heads), static_cast<long>(head_dim),
              causal_flops * static_cast<double>(layers) / best_cpu / 1e9, best_cpu * 1e3 / static_cast<double>(layers));
  return 0;
}
