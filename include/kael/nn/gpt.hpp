// The GPT of the book, built from kael::nn modules: GPT-2's architecture (pre-norm blocks of
// causal self-attention and a GELU MLP, learned positions, the output head tied to the token
// embedding), any size. Parameter names are kael's (blocks.0.attn.qkv.weight, ...);
// nn/gpt2_weights.hpp maps GPT-2 checkpoints onto them.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "kael/nn/layers.hpp"

namespace kael::nn {

struct GptConfig {
  std::int64_t vocab_size = 50257;
  std::int64_t n_positions = 1024;  // the context length
  std::int64_t n_layer = 12;
  std::int64_t n_head = 12;
  std::int64_t n_embd = 768;
  double dropout = 0.0;        // after attention, MLP and embeddings, and on attention weights (training only)
  bool tanh_gelu = true;       // GPT-2's gelu_new; false is the exact (erf) GELU
  bool bias = true;            // biases in the Linear layers
  bool tied_embeddings = true; // the head reuses token_embedding.weight; false adds lm_head.weight
  double layer_norm_eps = 1e-5;

  static GptConfig gpt2_small() { return {}; }
  static GptConfig gpt2_medium() { return GptConfig{.n_layer = 24, .n_head = 16, .n_embd = 1024}; }
  static GptConfig gpt2_large() { return GptConfig{.n_layer = 36, .n_head = 20, .n_embd = 1280}; }
  static GptConfig gpt2_xl() { return GptConfig{.n_layer = 48, .n_head = 25, .n_embd = 1600}; }
  // ValueError unless every size is positive, n_embd divides into n_head heads and dropout is in [0, 1).
  void validate() const;
};

// The keys and values of the positions seen so far, one layer per block, for B sequences, in
// the layout the engine's attention kernels read (positions in panels of 16 per head), with
// room for capacity() positions: a step writes its new positions in place, and a layer that
// runs out of room doubles its capacity (a copy now and then, where concatenating a step's
// keys to the cache copied all of them at every step). Holds F32.
class KVCache {
 public:
  std::int64_t length() const { return layers_.empty() ? 0 : layers_[0].length; }
  // Positions each layer holds room for without growing (0 before the first forward).
  std::int64_t capacity() const { return layers_.empty() ? 0 : layers_[0].capacity; }
  // Room for `positions` in all, made at once (nn::generate reserves the prompt and every new
  // token); applies to the layers now and to those the next forward creates.
  void reserve(std::int64_t positions);
  void clear();

 private:
  friend class CausalSelfAttention;
  struct Layer {
    std::int64_t batch = 0, heads = 0, head_dim = 0, capacity = 0, length = 0;
    std::vector<float> keys, values;  // per sequence, kernels::kv_layer_floats(heads, head_dim, capacity)
    std::int64_t sequence_floats() const;
  };
  // Layer `layer` for B sequences of `heads` heads, created on first use; ValueError when it
  // holds another batch size.
  Layer& layer(std::size_t layer, std::int64_t batch, std::int64_t heads, std::int64_t head_dim);
  // Appends T positions per sequence, row (b, t)'s key at k + (b T + t) stride, its value at v
  // + the same (heads side by side), growing the layer as needed.
  void append(Layer& layer, const float* k, const float* v, std::int64_t stride, std::int64_t T);
  static void grow(Layer& layer, std::int64_t positions);
  // The first `past` positions of a layer as two (B, heads, past, head_dim) tensors.
  static std::pair<Tensor, Tensor> past_tensors(const Layer& layer, std::int64_t past);

  std::vector<Layer> layers_;
  std::int64_t reserved_ = 0;
};

class CausalSelfAttention : public Module {
 public:
  explicit CausalSelfAttention(const GptConfig& config);
  // x (B, T, C) -> (B, T, C). With a cache, x holds the positions after cache.length() and the
  // cache's entry `layer` grows by T.
  Tensor forward(const Tensor& x) override;
  Tensor forward(const Tensor& x, KVCache* cache, std::size_t layer);
  std::string name() const override { return "CausalSelfAttention"; }
  std::shared_ptr<Linear> qkv, proj;

 private:
  std::int64_t n_head_;
  double dropout_;
  std::shared_ptr<Dropout> residual_dropout_;
};

class MLP : public Module {
 public:
  explicit MLP(const GptConfig& config);
  Tensor forward(const Tensor& x) override;  // (B, T, C) -> (B, T, C)
  std::string name() const override { return "MLP"; }
  std::shared_ptr<Linear> fc1, fc2;

 private:
  std::shared_ptr<GELU> gelu_;
  std::shared_ptr<Dropout> dropout_;
};

class Block : public Module {
 public:
  explicit Block(const GptConfig& config);
  Tensor forward(const Tensor& x) override;
  Tensor forward(const Tensor& x, KVCache* cache, std::size_t layer);
  std::string name() const override { return "Block"; }
  std::shared_ptr<LayerNorm> ln1, ln2;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<MLP> mlp;
};

class GPT : public Module {
 public:
  explicit GPT(const GptConfig& config = GptConfig::gpt2_small());
  // ids (B, T), integers -> logits (B, T, vocab_size). With a cache, ids continue the
  // sequences the cache holds (positions cache->length() ...), and the cache grows by T.
  Tensor forward(const Tensor& ids) override;
  Tensor forward(const Tensor& ids, KVCache* cache);
  std::string name() const override { return "GPT"; }
  const GptConfig& config() const { return config_; }

  std::shared_ptr<Embedding> token_embedding, position_embedding;
  std::shared_ptr<ModuleList<Block>> blocks;
  std::shared_ptr<LayerNorm> ln_final;
  std::shared_ptr<Linear> lm_head;  // null when tied to token_embedding

 private:
  GptConfig config_;
  std::shared_ptr<Dropout> embedding_dropout_;
  std::shared_ptr<detail::PackedWeight> tied_head_;  // the head's packed copy of token_embedding.weight
};

}  // namespace kael::nn
