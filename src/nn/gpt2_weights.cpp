#include "kael/nn/gpt2_weights.hpp"

#include <string_view>

#include "kael/core/error.hpp"
#include "kael/io/safetensors.hpp"
#include "model/weight_names.hpp"

namespace kael::nn {

namespace {

// Where nn::GPT keeps its blocks: ModuleList "blocks", so block i's parameters are "blocks.{i}.".
constexpr std::string_view kModuleBlockPrefix = "blocks.";

// `name` from one naming to the other, by the table in model/weight_names: a global parameter's
// whole name, or the part after a block's prefix. Unknown parts pass through, so a block's
// unknown tensor still gets the other block prefix.
std::string renamed(std::string_view name, bool to_module) {
  const auto from = [&](const model::ParameterName& n) { return to_module ? n.gpt2 : n.module; };
  const auto to = [&](const model::ParameterName& n) { return to_module ? n.module : n.gpt2; };
  for (const model::ParameterName& global : model::global_parameter_names())
    if (name == from(global)) return std::string(to(global));
  const std::string_view from_prefix = to_module ? model::kBlockPrefix : kModuleBlockPrefix;
  const std::string_view to_prefix = to_module ? kModuleBlockPrefix : model::kBlockPrefix;
  const auto block = model::split_block(name, from_prefix);
  if (!block) return std::string(name);
  std::string_view rest = block->second;
  for (const model::ParameterName& parameter : model::block_parameter_names())
    if (rest == from(parameter)) rest = to(parameter);
  return std::string(to_prefix) + std::to_string(block->first) + "." + std::string(rest);
}

}  // namespace

std::string translated_gpt2_name(std::string name) { return renamed(model::canonical_name(name), true); }

std::string gpt2_name(const std::string& name) {
  if (name == model::kHeadName) return name;  // outside the transformer in GPT2LMHeadModel
  return std::string(model::kTransformerPrefix) + renamed(name, false);
}

bool stored_transposed(const std::string& name) {
  const auto block = model::split_block(name, kModuleBlockPrefix);
  if (!block) return false;
  for (const model::ParameterName& parameter : model::block_parameter_names())
    if (block->second == parameter.module) return parameter.conv1d;
  return false;
}

void load_gpt2_weights(GPT& model, const std::filesystem::path& path) {
  const io::TensorMap stored = io::load_safetensors(path, io::LoadMode::Mapped);
  const StateDict expected = model.state_dict();
  StateDict translated;
  for (const auto& [stored_name, tensor] : stored) {
    const std::string name = translated_gpt2_name(stored_name);
    if (expected.contains(name)) translated.emplace(name, stored_transposed(name) ? tensor.T().contiguous() : tensor);
  }
  model.load_state_dict(translated);
}

io::TensorMap gpt2_state_dict(const GPT& model) {
  const GptConfig& config = model.config();
  if (!config.bias)
    throw ValueError("a GPT-2 checkpoint has a bias in every Linear layer; this model was built with bias = false");
  io::TensorMap out;
  for (const auto& [name, tensor] : model.state_dict()) {
    const Tensor value = tensor.detach();
    out.emplace(gpt2_name(name), stored_transposed(name) ? value.T().contiguous() : value);
  }
  return out;
}

void save_gpt2_weights(const GPT& model, const std::filesystem::path& path) {
  io::save_safetensors(path, gpt2_state_dict(model), {{"format", "pt"}});
}

}  // namespace kael::nn
