// What the forward pass keeps for the backward pass, and the backward pass's buffers, for a
// micro-batch of B x T tokens (M = B * T rows), carved out of one allocation.
#pragma once

#include <cstdint>
#include <vector>

#include "kael/model/gpt2.hpp"

namespace kael::train {

// One block's saved values. C = n_embd, H = mlp_dim, NH = n_head.
struct LayerActivations {
  float* ln_1 = nullptr;       // (M, C) ln_1's output
  float* ln_1_mean = nullptr;  // (M)
  float* ln_1_rstd = nullptr;  // (M)
  float* qkv = nullptr;        // (M, 3C)
  float* probs = nullptr;      // (B, NH, T, T) attention probabilities before dropout
  float* attn = nullptr;       // (M, C) attention output, c_proj's input
  float* mid = nullptr;        // (M, C) residual stream after the attention branch
  float* ln_2 = nullptr;       // (M, C)
  float* ln_2_mean = nullptr;  // (M)
  float* ln_2_rstd = nullptr;  // (M)
  float* fc = nullptr;         // (M, H) c_fc's output, before GELU
  float* gelu = nullptr;       // (M, H) mlp.c_proj's input
};

struct Activations {
  std::vector<LayerActivations> layers;
  std::vector<float*> residual;  // n_layer + 1 of (M, C): each block's input, then ln_f's
  float* ln_f = nullptr;         // (M, C)
  float* ln_f_mean = nullptr;    // (M)
  float* ln_f_rstd = nullptr;    // (M)
  float* losses = nullptr;       // (M) per-row cross-entropy
  float* branch = nullptr;       // (M, C) a projection's output before the residual add
  // Backward:
  float* d_residual = nullptr;  // (M, C) gradient of the residual stream
  float* d_branch = nullptr;    // (M, C) a projection's output gradient (after dropout)
  float* d_small = nullptr;     // (M, C) the gradient of a LayerNorm output or of attn
  float* d_wide = nullptr;      // (M, max(3C, H)) the gradient of qkv or of fc / gelu
  float* scratch = nullptr;     // for the head and the matrix products (see plan())
  std::int64_t scratch_floats = 0;
};

// Lays out the buffers for (B, T) from `base` (null: only counts) and returns the floats needed.
std::int64_t plan_activations(Activations& a, const model::Config& config, std::int64_t B, std::int64_t T,
                              float* base);

}  // namespace kael::train
