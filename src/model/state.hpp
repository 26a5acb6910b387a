// A session's memory: the KV cache and the activations of one chunk of positions, all
// allocated once when the session is made, so no forward step allocates.
#pragma once

#include <cstdint>
#include <memory>

#include "kael/model/gpt2.hpp"

namespace kael::model {

// Prompts are processed kChunk positions at a time: the activation buffers hold one chunk,
// whatever n_positions is. Each chunk reads every weight once, so longer chunks reuse it
// more: a 512-token GPT-2 small prefill on 2 cores took 532 ms with 64-row chunks, 478 ms
// with 128 and 452 ms with 256 (the GEMM itself runs at ~90% of the FMA peak from ~128 rows
// on). Buffers are not zero-filled, so rows a short prompt never reaches cost no memory.
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
  explicit State(const void* owner, const Config& config);

  const void* owner;  // the GPT2::Impl this session was made by
  int length = 0;     // positions in the cache
  Buffer k_cache;  // (L, kv_layer_floats) keys of every position so far, as kernels/attention.hpp lays them out
  Buffer v_cache;  // (L, kv_layer_floats) values
  Buffer x;        // (kChunk, C) residual stream
  Buffer ln;       // (kChunk, C) LayerNorm output
  Buffer qkv;      // (kChunk, 3C) query, key, value side by side
  Buffer att;      // (kChunk, C) attention output, heads concatenated
  Buffer fc;       // (kChunk, H) MLP hidden layer
  Buffer scores;   // (kChunk * NH, P) attention probabilities
  Buffer logits;   // (V) of the last position
  ForwardProfile* profile = nullptr;  // where forward passes add their time, if anywhere
};
