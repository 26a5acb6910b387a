// The model's parameters as the kernels read them, decided in one place (weights.cpp).
//
// Layout: every matrix is F32, row-major, exactly as the checkpoint stores it. GPT-2's Conv1D
// weights are input-major (C_in, C_out), which is what kernels::linear streams, so an F32
// checkpoint is used in place: tensors that io mapped point into the file mapping, the rest
// were read once into owned memory, and nothing is copied or transposed here. F16/BF16/F64
// tensors are converted to F32 one at a time, freeing each source as it goes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kael/core/tensor.hpp"
#include "kael/model/gpt2.hpp"

namespace kael::model {

// One transformer block. C = n_embd, H = mlp_dim() (4C).
struct LayerWeights {
  const float* ln_1_weight = nullptr;   // (C)
  const float* ln_1_bias = nullptr;     // (C)
  const float* qkv_weight = nullptr;    // (C, 3C)  attn.c_attn: q, k, v side by side
  const float* qkv_bias = nullptr;      // (3C)
  const float* attn_proj_weight = nullptr;  // (C, C)  attn.c_proj
  const float* attn_proj_bias = nullptr;    // (C)
  const float* ln_2_weight = nullptr;   // (C)
  const float* ln_2_bias = nullptr;     // (C)
  const float* fc_weight = nullptr;     // (C, H)  mlp.c_fc
  const float* fc_bias = nullptr;       // (H)
  const float* mlp_proj_weight = nullptr;  // (H, C)  mlp.c_proj
  const float* mlp_proj_bias = nullptr;    // (C)
};

struct Weights {
  const float* wte = nullptr;  // (V, C) token embeddings
  const float* wpe = nullptr;  // (P, C) learned position embeddings
  std::vector<LayerWeights> layers;
  const float* ln_f_weight = nullptr;  // (C)
  const float* ln_f_bias = nullptr;    // (C)
  const float* lm_head = nullptr;      // (V, C) output head: wte itself when tied
  std::int64_t parameter_count = 0;
  std::vector<Tensor> storage;  // owns (or keeps the mapping of) everything pointed to above
};

// Matches `tensors` (checkpoint names) to the parameters `config` calls for, checks names,
// shapes and dtypes before converting anything, then builds the weights. Consumes `tensors`.
// `source` names the checkpoint in messages.
Weights load_weights(const Config& config, std::map<std::string, Tensor> tensors, std::string_view source);

}  // namespace kael::model
