// Speed of decode attention (one query row per sequence, GPT-2 small's 12 heads of 64) over the
// contiguous cache layout (cached_attention, the layout before KV blocks) and over a block
// table (paged_attention, what the model runs), at several context lengths; then over the block
// table with the cache evicted before each call (as a layer's weights evict it in the model),
// by the set's one-head kernel head after head and by its row kernel across the heads (what
// paged_attention runs for one row), with the keys' and values' GB/s. Single-threaded, timed in
// CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID), so the figures hold on a machine
// shared with other work. Usage: attention_speed [isa: scalar|avx2|avx512|amx]
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/dispatch/cpu_features.hpp"
#include "kernels/dispatch/kernel_table.hpp"
#include "kernels/infra/thread_pool.hpp"
#include "kael/core/cpu_clock.hpp"

using namespace kael::kernels;

using kael::thread_cpu_seconds;

namespace {

// Microseconds of CPU per call of f, the best of 5 rounds of `calls` calls.
template <typename F>
double best_us(int calls, F&& f) {
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    const double start = thread_cpu_seconds();
    for (int i = 0; i < calls; ++i) f();
    best = std::min(best, (thread_cpu_seconds() - start) / calls * 1e6);
  }
  return best;
}

// Prefill: a 512-token prompt runs as two chunks of 256 rows (pos0 = 0, then 256), each storing
// its keys and values into the block table and attending to every position so far, as the
// model's attention block does per layer.
void prefill_attention(std::int64_t n_head, std::int64_t head_dim, std::int64_t block_positions, std::mt19937& rng) {
  constexpr std::int64_t T = 256, prompt = 512;
  const std::int64_t C = n_head * head_dim, layer_floats = kv_layer_floats(n_head, head_dim, block_positions);
  const std::int64_t n_blocks = prompt / block_positions;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> memory(static_cast<std::size_t>(n_blocks * 2 * layer_floats));
  std::vector<float*> blocks;
  for (std::int64_t b = 0; b < n_blocks; ++b) blocks.push_back(memory.data() + b * 2 * layer_floats);
  const KvBlocks cache{blocks.data(), 0, layer_floats, block_positions};
  std::vector<float> qkv(static_cast<std::size_t>(T * 3 * C)), out(static_cast<std::size_t>(T * C));
  std::vector<float> scratch(static_cast<std::size_t>(attention_scratch_size(T, prompt - T, n_head)));
  for (float& x : qkv) x = normal(rng);
  std::printf("\nprefill attention, %lld-token prompt in chunks of %lld, 1 thread, %s: us of thread CPU per layer\n",
              static_cast<long long>(prompt), static_cast<long long>(T), isa_name(active_isa()));
  // The same positions in the contiguous layout (one block of the whole prompt), for comparison.
  const std::int64_t capacity = kv_capacity(prompt);
  std::vector<float> k_layer(static_cast<std::size_t>(kv_layer_floats(n_head, head_dim, prompt))), v_layer(k_layer.size());
  for (std::int64_t s = 0; s < prompt; ++s)
    kv_store(k_layer.data(), v_layer.data(), qkv.data() + s % T * 3 * C + C, qkv.data() + s % T * 3 * C + 2 * C, s,
             n_head, head_dim, capacity);
  std::printf("%8s %12s %12s %10s %12s\n", "pos0", "kv store", "paged", "GFLOP/s", "contiguous");
  for (std::int64_t pos0 = 0; pos0 < prompt; pos0 += T) {
    const double store = best_us(20, [&] {
      kv_store_paged_rows(cache, qkv.data() + C, qkv.data() + 2 * C, 3 * C, T, pos0, n_head, head_dim);
    });
    const double attend = best_us(5, [&] {
      paged_attention(out.data(), scratch.data(), qkv.data(), 3 * C, cache, T, pos0, n_head, head_dim);
    });
    const double contiguous = best_us(5, [&] {
      cached_attention(out.data(), scratch.data(), qkv.data(), 3 * C, k_layer.data(), v_layer.data(), T, pos0, n_head,
                       head_dim, capacity);
    });
    // The useful products: row t's scores and weighted sum over its pos0 + t + 1 positions.
    const double flops = 4.0 * static_cast<double>(C) * static_cast<double>(T * pos0 + T * (T + 1) / 2);
    std::printf("%8lld %12.1f %12.1f %10.1f %12.1f\n", static_cast<long long>(pos0), store, attend, flops / attend / 1e3,
                contiguous);
  }
}

// Microseconds of CPU per call of f with the caches emptied before each (untimed): the best of
// 5 rounds of 10 calls.
template <typename F>
double cold_us(F&& f) {
  // Beyond the last-level caches, the 300 MiB one a 16-core Xeon guest reports among them.
  static std::vector<char> evict(std::size_t{512} << 20, 1);
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    double total = 0;
    for (int i = 0; i < 10; ++i) {
      for (char& c : evict) c = static_cast<char>(c + 1);
      const double start = thread_cpu_seconds();
      f();
      total += thread_cpu_seconds() - start;
    }
    best = std::min(best, total / 10 * 1e6);
  }
  return best;
}

// One decode row through the set's one-head kernel, head after head (paged_attention's way
// before the row kernel).
void attend_by_head(float* out, const float* q, const KvBlocks& cache, std::int64_t n_blocks, std::int64_t L,
                    std::int64_t n_head, std::int64_t head_dim) {
  const std::int64_t C = n_head * head_dim, head_floats = kv_head_floats(head_dim, cache.block_positions);
  std::vector<const float*> keys(static_cast<std::size_t>(n_blocks)), values(keys.size());
  for (std::int64_t h = 0; h < n_head; ++h) {
    for (std::int64_t b = 0; b < n_blocks; ++b) {
      keys[b] = cache.blocks[b] + cache.key_offset + h * head_floats;
      values[b] = cache.blocks[b] + cache.value_offset + h * head_floats;
    }
    active_kernels().attend_head(out + h * head_dim, C, q + h * head_dim, 3 * C, keys.data(), values.data(),
                                 cache.block_positions, 1, L - 1, head_dim);
  }
}

}  // namespace

int main(int argc, char** argv) {
  set_num_threads(1);
  if (argc > 1)
    for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512, Isa::amx})
      if (std::string(argv[1]) == isa_name(isa)) set_isa(isa);
  constexpr std::int64_t n_head = 12, head_dim = 64, C = n_head * head_dim, block_positions = 32;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::printf("decode attention, 12 heads x 64, 1 thread, %s: us of thread CPU per call\n", isa_name(active_isa()));
  std::printf("%8s %12s %12s %8s\n", "context", "contiguous", "paged", "ratio");
  struct Cold {
    std::int64_t L;
    double by_head, across;
  };
  std::vector<Cold> cold;
  for (std::int64_t L : {32, 128, 512, 1024}) {
    const std::int64_t capacity = kv_capacity(L), n_blocks = (L + block_positions - 1) / block_positions;
    const std::int64_t layer_floats = kv_layer_floats(n_head, head_dim, block_positions);
    std::vector<float> k_layer(kv_layer_floats(n_head, head_dim, L)), v_layer(k_layer.size());
    std::vector<float> memory(static_cast<std::size_t>(n_blocks * 2 * layer_floats));
    std::vector<float*> blocks;
    for (std::int64_t b = 0; b < n_blocks; ++b) blocks.push_back(memory.data() + b * 2 * layer_floats);
    const KvBlocks cache{blocks.data(), 0, layer_floats, block_positions};
    std::vector<float> k(C), v(C), q(3 * C), out(C), scratch(static_cast<std::size_t>(n_head * L));
    for (std::int64_t s = 0; s < L; ++s) {
      for (std::int64_t i = 0; i < C; ++i) k[i] = normal(rng), v[i] = normal(rng);
      kv_store(k_layer.data(), v_layer.data(), k.data(), v.data(), s, n_head, head_dim, capacity);
      kv_store_paged(cache, k.data(), v.data(), s, n_head, head_dim);
    }
    for (float& x : q) x = normal(rng);
    const int calls = static_cast<int>(std::max<std::int64_t>(20, 40000 / L));
    const double contiguous = best_us(calls, [&] {
      cached_attention(out.data(), scratch.data(), q.data(), 3 * C, k_layer.data(), v_layer.data(), 1, L - 1, n_head,
                       head_dim, capacity);
    });
    const double paged = best_us(calls, [&] {
      paged_attention(out.data(), scratch.data(), q.data(), 3 * C, cache, 1, L - 1, n_head, head_dim);
    });
    std::printf("%8lld %12.1f %12.1f %8.2f\n", static_cast<long long>(L), contiguous, paged, paged / contiguous);
    if (active_kernels().attend_head == nullptr) continue;
    const double by_head = cold_us([&] { attend_by_head(out.data(), q.data(), cache, n_blocks, L, n_head, head_dim); });
    const double across = cold_us([&] {
      paged_attention(out.data(), scratch.data(), q.data(), 3 * C, cache, 1, L - 1, n_head, head_dim);
    });
    cold.push_back({L, by_head, across});
  }
  if (!cold.empty()) {
    std::printf("\ndecode attention with the cache evicted before each call: us of thread CPU per call\n");
    std::printf("%8s %12s %14s %8s %20s\n", "context", "by head", "across heads", "ratio", "GB/s across heads");
    for (const auto& [L, by_head, across] : cold)
      std::printf("%8lld %12.1f %14.1f %8.2f %20.1f\n", static_cast<long long>(L), by_head, across, across / by_head,
                  2.0 * static_cast<double>(L * C) * 4 / across / 1e3);
  }
  prefill_attention(n_head, head_dim, block_positions, rng);
  return 0;
}
