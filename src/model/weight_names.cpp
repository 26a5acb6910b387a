#include "model/weight_names.hpp"

#include <array>
#include <charconv>

namespace kael::model {
namespace {

// A parameter's shape in the config's sizes: V vocab, P positions, C embedding, H MLP width.
enum class Dims { V_C, P_C, C, C3, H, C_C3, C_C, C_H, H_C };

struct LayerParameter {
  ParameterName name;
  const float* LayerWeights::*slot;
  Dims dims;
};

// Per-block parameters in checkpoint order. Conv1D weights are (in, out).
constexpr LayerParameter kLayerParameters[] = {
    {{"ln_1.weight", "ln1.weight"}, &LayerWeights::ln_1_weight, Dims::C},
    {{"ln_1.bias", "ln1.bias"}, &LayerWeights::ln_1_bias, Dims::C},
    {{"attn.c_attn.weight", "attn.qkv.weight", true}, &LayerWeights::qkv_weight, Dims::C_C3},
    {{"attn.c_attn.bias", "attn.qkv.bias"}, &LayerWeights::qkv_bias, Dims::C3},
    {{"attn.c_proj.weight", "attn.proj.weight", true}, &LayerWeights::attn_proj_weight, Dims::C_C},
    {{"attn.c_proj.bias", "attn.proj.bias"}, &LayerWeights::attn_proj_bias, Dims::C},
    {{"ln_2.weight", "ln2.weight"}, &LayerWeights::ln_2_weight, Dims::C},
    {{"ln_2.bias", "ln2.bias"}, &LayerWeights::ln_2_bias, Dims::C},
    {{"mlp.c_fc.weight", "mlp.fc1.weight", true}, &LayerWeights::fc_weight, Dims::C_H},
    {{"mlp.c_fc.bias", "mlp.fc1.bias"}, &LayerWeights::fc_bias, Dims::H},
    {{"mlp.c_proj.weight", "mlp.fc2.weight", true}, &LayerWeights::mlp_proj_weight, Dims::H_C},
    {{"mlp.c_proj.bias", "mlp.fc2.bias"}, &LayerWeights::mlp_proj_bias, Dims::C},
};

// Where a global parameter comes in checkpoint order: before the blocks, after them, or last and
// only when the head is untied.
enum class Place { BeforeBlocks, AfterBlocks, UntiedHead };

struct GlobalParameter {
  ParameterName name;
  const float* Weights::*slot;
  Dims dims;
  Place place;
};

constexpr GlobalParameter kGlobalParameters[] = {
    {{"wte.weight", "token_embedding.weight"}, &Weights::wte, Dims::V_C, Place::BeforeBlocks},
    {{"wpe.weight", "position_embedding.weight"}, &Weights::wpe, Dims::P_C, Place::BeforeBlocks},
    {{"ln_f.weight", "ln_final.weight"}, &Weights::ln_f_weight, Dims::C, Place::AfterBlocks},
    {{"ln_f.bias", "ln_final.bias"}, &Weights::ln_f_bias, Dims::C, Place::AfterBlocks},
    {{kHeadName, kHeadName}, &Weights::lm_head, Dims::V_C, Place::UntiedHead},
};

// The name column of a table, for the spans the header hands out.
template <typename Row, std::size_t N>
constexpr std::array<ParameterName, N> names_of(const Row (&rows)[N]) {
  std::array<ParameterName, N> names{};
  for (std::size_t i = 0; i < N; ++i) names[i] = rows[i].name;
  return names;
}
constexpr auto kLayerNames = names_of(kLayerParameters);
constexpr auto kGlobalNames = names_of(kGlobalParameters);

constexpr std::string_view kIgnoredLayerBuffers[] = {"attn.bias", "attn.masked_bias"};

}  // namespace

std::span<const ParameterName> global_parameter_names() { return kGlobalNames; }
std::span<const ParameterName> block_parameter_names() { return kLayerNames; }

std::optional<std::pair<long, std::string_view>> split_block(std::string_view name, std::string_view prefix) {
  if (!name.starts_with(prefix)) return std::nullopt;
  name.remove_prefix(prefix.size());
  long index = -1;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), index);
  if (ec != std::errc() || end == name.data() || index < 0 || end == name.data() + name.size() || *end != '.')
    return std::nullopt;
  return std::pair{index, name.substr(static_cast<std::size_t>(end - name.data()) + 1)};
}

std::vector<ParameterSpec> parameter_specs(const Config& config) {
  const std::int64_t C = config.n_embd, H = config.mlp_dim();
  const auto shape_of = [&](Dims d) -> Shape {
    switch (d) {
      case Dims::V_C: return {config.vocab_size, C};
      case Dims::P_C: return {config.n_positions, C};
      case Dims::C: return {C};
      case Dims::C3: return {3 * C};
      case Dims::H: return {H};
      case Dims::C_C3: return {C, 3 * C};
      case Dims::C_C: return {C, C};
      case Dims::C_H: return {C, H};
      case Dims::H_C: return {H, C};
    }
    return {};
  };
  std::vector<ParameterSpec> specs;
  const auto add_globals = [&](Place place) {
    for (const GlobalParameter& p : kGlobalParameters)
      if (p.place == place) specs.push_back({std::string(p.name.gpt2), shape_of(p.dims), -1, p.slot, nullptr});
  };
  add_globals(Place::BeforeBlocks);
  for (int layer = 0; layer < config.n_layer; ++layer)
    for (const LayerParameter& p : kLayerParameters)
      specs.push_back({std::string(kBlockPrefix) + std::to_string(layer) + "." + std::string(p.name.gpt2),
                       shape_of(p.dims), layer, nullptr, p.slot});
  add_globals(Place::AfterBlocks);
  if (!config.tie_word_embeddings) add_globals(Place::UntiedHead);
  return specs;
}

std::string_view canonical_name(std::string_view name) {
  if (name.starts_with(kTransformerPrefix)) name.remove_prefix(kTransformerPrefix.size());
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
    if (block->second == p.name.gpt2) return block->first;
  return std::nullopt;
}

}  // namespace kael::model
