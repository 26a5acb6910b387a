#include "model/weight_names.hpp"

#include <charconv>

namespace kael::model {
namespace {

constexpr std::string_view kPrefix = "transformer.";

struct LayerParameter {
  const char* suffix;
  const float* LayerWeights::*slot;
  enum Shape { C, C3, H, C_C3, C_C, C_H, H_C } shape;
};

// Per-block parameters in checkpoint order. Conv1D weights are (in, out).
constexpr LayerParameter kLayerParameters[] = {
    {"ln_1.weight", &LayerWeights::ln_1_weight, LayerParameter::C},
    {"ln_1.bias", &LayerWeights::ln_1_bias, LayerParameter::C},
    {"attn.c_attn.weight", &LayerWeights::qkv_weight, LayerParameter::C_C3},
    {"attn.c_attn.bias", &LayerWeights::qkv_bias, LayerParameter::C3},
    {"attn.c_proj.weight", &LayerWeights::attn_proj_weight, LayerParameter::C_C},
    {"attn.c_proj.bias", &LayerWeights::attn_proj_bias, LayerParameter::C},
    {"ln_2.weight", &LayerWeights::ln_2_weight, LayerParameter::C},
    {"ln_2.bias", &LayerWeights::ln_2_bias, LayerParameter::C},
    {"mlp.c_fc.weight", &LayerWeights::fc_weight, LayerParameter::C_H},
    {"mlp.c_fc.bias", &LayerWeights::fc_bias, LayerParameter::H},
    {"mlp.c_proj.weight", &LayerWeights::mlp_proj_weight, LayerParameter::H_C},
    {"mlp.c_proj.bias", &LayerWeights::mlp_proj_bias, LayerParameter::C},
};

constexpr std::string_view kIgnoredLayerBuffers[] = {"attn.bias", "attn.masked_bias"};

// Splits "h.{i}.rest" into i and rest.
std::optional<std::pair<long, std::string_view>> split_block(std::string_view name) {
  if (!name.starts_with("h.")) return std::nullopt;
  name.remove_prefix(2);
  long index = -1;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), index);
  if (ec != std::errc() || end == name.data() || index < 0 || end == name.data() + name.size() || *end != '.')
    return std::nullopt;
  return std::pair{index, name.substr(static_cast<std::size_t>(end - name.data()) + 1)};
}

}  // namespace

std::vector<ParameterSpec> parameter_specs(const Config& config) {
  const std::int64_t C = config.n_embd, H = config.mlp_dim();
  const auto shape_of = [&](LayerParameter::Shape s) -> Shape {
    switch (s) {
      case LayerParameter::C: return {C};
      case LayerParameter::C3: return {3 * C};
      case LayerParameter::H: return {H};
      case LayerParameter::C_C3: return {C, 3 * C};
      case LayerParameter::C_C: return {C, C};
      case LayerParameter::C_H: return {C, H};
      case LayerParameter::H_C: return {H, C};
    }
    return {};
  };
  std::vector<ParameterSpec> specs;
  specs.push_back({"wte.weight", {config.vocab_size, C}, -1, &Weights::wte, nullptr});
  specs.push_back({"wpe.weight", {config.n_positions, C}, -1, &Weights::wpe, nullptr});
  for (int layer = 0; layer < config.n_layer; ++layer)
    for (const LayerParameter& p : kLayerParameters)
      specs.push_back({"h." + std::to_string(layer) + "." + p.suffix, shape_of(p.shape), layer, nullptr, p.slot});
  specs.push_back({"ln_f.weight", {C}, -1, &Weights::ln_f_weight, nullptr});
  specs.push_back({"ln_f.bias", {C}, -1, &Weights::ln_f_bias, nullptr});
  if (!config.tie_word_embeddings)
    specs.push_back({std::string(kHeadName), {config.vocab_size, C}, -1, &Weights::lm_head, nullptr});
  return specs;
}

std::string_view canonical_name(std::string_view name) {
  if (name.starts_with(kPrefix)) name.remove_prefix(kPrefix.size());
  return name;
}

bool is_ignored_buffer(std::string_view canonical) {
  const auto block = split_block(canonical);
  if (!block) return false;
  for (std::string_view buffer : kIgnoredLayerBuffers)
    if (block->second == buffer) return true;
  return false;
}

std::optional<long> block_index(std::string_view canonical) {
  const auto block = split_block(canonical);
  if (!block) return std::nullopt;
  for (const LayerParameter& p : kLayerParameters)
    if (block->second == p.suffix) return block->first;
  return std::nullopt;
}

}  // namespace kael::model
