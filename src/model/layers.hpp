// The transformer blocks, written once for every forward pass. A pass hands over its rows'
// activations and the one step in which passes differ: how each row's query meets the KV
// cache (one sequence's chunk of new positions, or many sequences at one position each).
// The products run on all rows at once, so each weight is read once per pass, and every row
// goes through the same kernels whichever pass it is in (forward_batch_step equals
// forward_chunk bit for bit).
#pragma once

#include <cstdint>

#include "model/profile.hpp"
#include "model/weights.hpp"

namespace kael::model {

// Activation buffers of `rows` rows. C = n_embd, H = mlp_dim().
struct LayerBuffers {
  float* x;    // (rows, C) residual stream, updated in place
  float* ln;   // (rows, C) LayerNorm output
  float* qkv;  // (rows, 3C) query, key, value side by side
  float* att;  // (rows, C) attention output, heads concatenated
  float* fc;   // (rows, H) MLP hidden layer
  std::int64_t rows;
};

// The step that differs between passes.
class CacheAttention {
 public:
  // att (rows, C) = each row's attention over its own sequence's cache of layer `layer`, after
  // storing the row's key and value there; qkv (rows, 3C) holds the rows' q, k, v.
  virtual void attend(float* att, const float* qkv, int layer) = 0;

 protected:
  ~CacheAttention() = default;
};

// Runs every block over buffers.x, adding each part's time to `timer`.
void run_layers(const Config& config, const Weights& weights, const LayerBuffers& buffers, CacheAttention& cache,
                PartTimer& timer);

// logits (rows, V) = ln_f(x) @ head^T for `rows` rows of x (rows, C); ln (rows, C) is scratch.
void final_logits(const Config& config, const Weights& weights, float* logits, float* ln, const float* x,
                  std::int64_t rows, PartTimer& timer);

}  // namespace kael::model
