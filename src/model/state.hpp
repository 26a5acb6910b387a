// A session's memory: the activations of one chunk of positions, allocated once when the
// session is made, and the KV cache, in blocks of a KvPool taken as the sequence grows (a
// forward step allocates at most a block that the pool never handed out before).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kael/model/gpt2.hpp"
#include "kernels/attention.hpp"
#include "model/kv_pool.hpp"

namespace kael::model {

// Prompts are processed kChunk positions at a time: the activation buffers hold one chunk,
// whatever n_positions is. Each chunk reads every weight once, so longer chunks reuse it
// more, up to where the GEMM runs near its peak (the chunk sizes measured:
// docs/performance.md, "The measurements behind the code's constants").
// Buffers are not zero-filled, so rows a short prompt never reaches cost no memory.
inline constexpr std::int64_t kChunk = 256;

// A float array that is not zero-filled: pages of a large KV cache stay untouched (and free)
// until positions reach them.
struct Buffer {
  std::unique_ptr<float[]> data;
  explicit Buffer(std::int64_t n) : data(std::make_unique_for_overwrite<float[]>(static_cast<std::size_t>(n))) {}
  float* get() const { return data.get(); }
};

}  // namespace kael::model

// C = n_embd, H = mlp_dim(), L = n_layer, P = n_positions, V = vocab_size, NH = n_head.
struct kael::model::Session::State {
  State(const void* owner, const Config& config, std::shared_ptr<KvPool> pool);
  ~State();  // gives the blocks back
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  // Holds the blocks of `positions` positions, taking more from the pool (not beyond the
  // context). False, with nothing taken, when the pool has too few free.
  bool grow_to(std::int64_t positions);
  // Gives back the blocks past the first `keep`.
  void shrink_to_blocks(std::int64_t keep);
  // The cache of one layer as the attention kernels read it.
  kernels::KvBlocks layer_cache(int layer) const {
    return {blocks.data(), 2 * layer * pool->impl().layer_floats, (2 * layer + 1) * pool->impl().layer_floats,
            kBlockPositions};
  }

  const void* owner;  // the GPT2::Impl this session was made by
  int length = 0;     // positions in the cache
  std::int64_t max_blocks;       // the blocks of n_positions positions
  std::shared_ptr<KvPool> pool;  // where the blocks come from
  std::vector<float*> blocks;    // block b: positions b * kBlockPositions .., every layer's keys and values
  Buffer x;        // (kChunk, C) residual stream
  Buffer ln;       // (kChunk, C) LayerNorm output
  Buffer qkv;      // (kChunk, 3C) query, key, value side by side
  Buffer att;      // (kChunk, C) attention output, heads concatenated
  Buffer fc;       // (kChunk, H) MLP hidden layer
  Buffer scores;   // (kChunk * NH, P) attention probabilities
  Buffer logits;   // (V) of the last position
  ForwardProfile* profile = nullptr;  // where forward passes add their time, if anywhere
};
