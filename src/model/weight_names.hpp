// The one place that knows GPT-2's Hugging Face parameter names: what each is called, the name
// kael::nn::GPT gives it, whether it is a Conv1D weight, its shape under a config, where it goes
// in Weights, and which names are buffers to ignore.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kael/core/tensor.hpp"
#include "model/weights.hpp"

namespace kael::model {

inline constexpr std::string_view kHeadName = "lm_head.weight";

struct ParameterSpec {
  std::string name;  // canonical: without the "transformer." prefix, e.g. "h.0.ln_1.weight"
  Shape shape;
  int layer = -1;                                 // -1: a global parameter
  const float* Weights::*global_slot = nullptr;   // where a global parameter goes
  const float* LayerWeights::*layer_slot = nullptr;  // where a per-layer one goes
};

// One parameter's GPT-2 name and the name kael::nn::GPT gives the same tensor; inside a block,
// the parts after "h.{i}." and "blocks.{i}.". conv1d marks the weights GPT-2's Conv1D stores
// (in, out), where the engine reads them as they are and nn's Linear holds them (out, in).
struct ParameterName {
  std::string_view gpt2;
  std::string_view module;
  bool conv1d = false;
};

// wte, wpe, ln_f and lm_head.weight (the untied head, one name in both).
std::span<const ParameterName> global_parameter_names();
// The twelve parameters of each block, in checkpoint order.
std::span<const ParameterName> block_parameter_names();

inline constexpr std::string_view kTransformerPrefix = "transformer.";
inline constexpr std::string_view kBlockPrefix = "h.";

// Splits "<prefix>{i}.<rest>" (GPT-2's blocks: prefix "h.") into i and rest.
std::optional<std::pair<long, std::string_view>> split_block(std::string_view name,
                                                             std::string_view prefix = kBlockPrefix);

// Every parameter `config` calls for, in checkpoint order (wte, wpe, h.0 ... h.{L-1}, ln_f,
// and lm_head when the head is untied).
std::vector<ParameterSpec> parameter_specs(const Config& config);

// The name without the "transformer." prefix that GPT2LMHeadModel's save_pretrained adds.
std::string_view canonical_name(std::string_view name);

// True for tensors that are not parameters and are dropped at load: the causal-mask buffers
// h.{i}.attn.bias and h.{i}.attn.masked_bias of older checkpoints.
bool is_ignored_buffer(std::string_view canonical);

// The block index of a name "h.{i}.<known suffix>", so that a layer beyond n_layer can be
// reported as such (config.json and weights disagree) rather than as an unknown name.
std::optional<long> block_index(std::string_view canonical);

}  // namespace kael::model
