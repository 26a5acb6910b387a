// The trainable parameters: one flat F32 buffer of values and one of gradients, cut into the
// tensors of model::parameter_specs (names, shapes, checkpoint order), with typed views of
// both for the forward and backward passes. Fresh initialization and checkpoint loading.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kael/core/tensor.hpp"
#include "kael/model/gpt2.hpp"
#include "kael/train/gpt2_train.hpp"

namespace kael::train {

// One block's tensors (values or gradients). Conv1D weights (in, out); C = n_embd, H = mlp_dim.
struct LayerTensors {
  float* ln_1_weight = nullptr;       // (C)
  float* ln_1_bias = nullptr;         // (C)
  float* qkv_weight = nullptr;        // (C, 3C)
  float* qkv_bias = nullptr;          // (3C)
  float* attn_proj_weight = nullptr;  // (C, C)
  float* attn_proj_bias = nullptr;    // (C)
  float* ln_2_weight = nullptr;       // (C)
  float* ln_2_bias = nullptr;         // (C)
  float* fc_weight = nullptr;         // (C, H)
  float* fc_bias = nullptr;           // (H)
  float* mlp_proj_weight = nullptr;   // (H, C)
  float* mlp_proj_bias = nullptr;     // (C)
};

struct ModelTensors {
  float* wte = nullptr;   // (V, C)
  float* wpe = nullptr;   // (P, C)
  std::vector<LayerTensors> layers;
  float* ln_f_weight = nullptr;  // (C)
  float* ln_f_bias = nullptr;    // (C)
  float* head = nullptr;         // (V, C): lm_head.weight, or wte itself when tied
};

struct ParameterSet {
  std::vector<Parameter> parameters;  // checkpoint order, pointing into values / grads
  Tensor values;                      // (total) F32
  Tensor grads;                       // (total) F32
  ModelTensors value;                 // views of values
  ModelTensors grad;                  // views of grads
  std::int64_t total = 0;             // floats in each buffer
};

// Zeroed values and gradients for `config` (validated first); without `gradients`, the values
// alone (grads undefined, every grad pointer null), for weights that only pass through.
ParameterSet make_parameter_set(const model::Config& config, bool gradients = true);

// transformers' GPT-2 initialization (gpt2_train.hpp), seeded.
void initialize(ParameterSet& set, const model::Config& config, std::uint64_t seed);

// Copies the checkpoint's tensors (matched and checked by the model layer) into the values,
// converted to F32. With `mapped`, each tensor's mapped pages are released once copied.
void load_values(ParameterSet& set, const model::Config& config, std::map<std::string, Tensor> tensors,
                 std::string_view source, bool mapped);

}  // namespace kael::train
