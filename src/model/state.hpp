// A session's memory: the KV cache and the activations of one chunk of positions, all
// allocated once when the session is made, so no forward step allocates.
#pragma once

#include <cstdint>
#include <memory>

#include "kael/model/gpt2.hpp"

namespace kael::model {

// Prompts are processed kChunk positions at a time: the activation buffers hold one chunk,
// whatever n_positions is, and 64 rows are enough for the matmuls to reuse each weight block.
inline constexpr std::int64_t kChunk = 64;

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
  explicit State(const void* owner, const Config& config);

  const void* owner;  // the GPT2::Impl this session was made by
  int length = 0;     // positions in the cache
  Buffer k_cache;  // (L, P, C) keys of every position so far
  Buffer v_cache;  // (L, P, C) values
  Buffer x;        // (kChunk, C) residual stream
  Buffer ln;       // (kChunk, C) LayerNorm output
  Buffer qkv;      // (kChunk, 3C) query, key, value side by side
  Buffer att;      // (kChunk, C) attention output, heads concatenated
  Buffer proj;     // (kChunk, C) output of a projection, before the residual add
  Buffer fc;       // (kChunk, H) MLP hidden layer
  Buffer scores;   // (kChunk * NH, P) attention probabilities
  Buffer logits;   // (V) of the last position
};
