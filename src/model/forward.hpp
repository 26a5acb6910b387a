// The forward pass (docs/behaviour.md, "The forward pass"; llm.c style: flat layer functions over
// raw buffers, shapes in comments), for one sequence's chunk of new positions or for a batch of
// sequences taking one position each.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/attention.hpp"
#include "model/state.hpp"
#include "model/weights.hpp"

namespace kael::model {

// Runs tokens (T <= kChunk, already validated) at positions state.length .. + T - 1, appending
// their keys and values to the cache; with want_logits, fills state.logits for the last one.
// With all_logits ((T, V), for forward_all_logits), fills it with every position's logits
// instead.
void forward_chunk(const Config& config, const Weights& weights, Session::State& state, const std::int32_t* tokens,
                   std::int64_t T, bool want_logits, float* all_logits = nullptr);

// Activations of a batch of B sequences, one row each; grown (never shrunk) to the largest
// batch seen, so steady decoding allocates nothing. C = n_embd, H = mlp_dim(), V = vocab.
struct BatchWorkspace {
  std::int64_t capacity = 0;
  std::vector<float> x;       // (B, C) residual stream
  std::vector<float> ln;      // (B, C)
  std::vector<float> qkv;     // (B, 3C)
  std::vector<float> att;     // (B, C)
  std::vector<float> fc;      // (B, H)
  std::vector<float> scores;  // (B, n_head, P) attention probabilities
  std::vector<float> logits;  // (B, V)
  std::vector<kernels::PagedRow> rows;  // (B)
  void reserve(const Config& config, std::int64_t batch);
};

// One decode step of B sequences (already validated): states[b] takes tokens[b] at its own
// position; fills each state's logits and advances its length. `profiles` are the distinct
// profiles to add the step's time to.
void forward_batch_step(const Config& config, const Weights& weights, BatchWorkspace& ws,
                        Session::State* const* states, const std::int32_t* tokens, std::int64_t B,
                        const std::vector<ForwardProfile*>& profiles);

}  // namespace kael::model
