#include "kael/nn/gpt2_weights.hpp"

#include <string_view>

#include "kael/core/error.hpp"
#include "kael/io/safetensors.hpp"

namespace kael::nn {

namespace {

// GPT-2's name pieces and kael's, one table for both directions. The top-level pairs match at
// the start of a name; the block pairs have dots on both sides, so .attn.c_proj. and
// .mlp.c_proj. cannot be confused.
struct NamePair {
  std::string_view gpt2, kael;
};
constexpr NamePair kTopLevelNames[] = {
    {"wte.", "token_embedding."}, {"wpe.", "position_embedding."}, {"ln_f.", "ln_final."}, {"h.", "blocks."}};
constexpr NamePair kBlockNames[] = {{".ln_1.", ".ln1."},           {".ln_2.", ".ln2."},
                                    {".attn.c_attn.", ".attn.qkv."}, {".attn.c_proj.", ".attn.proj."},
                                    {".mlp.c_fc.", ".mlp.fc1."},     {".mlp.c_proj.", ".mlp.fc2."}};
constexpr std::string_view kTransformerPrefix = "transformer.";

// `name` with its first top-level piece and then its block pieces swapped, GPT-2's for kael's
// (to_kael) or back.
std::string renamed(std::string name, bool to_kael) {
  const auto from = [&](const NamePair& pair) { return to_kael ? pair.gpt2 : pair.kael; };
  const auto to = [&](const NamePair& pair) { return to_kael ? pair.kael : pair.gpt2; };
  for (const NamePair& pair : kTopLevelNames) {
    if (!name.starts_with(from(pair))) continue;
    name.replace(0, from(pair).size(), to(pair));
    if (pair.gpt2 == "h.") {
      for (const NamePair& block : kBlockNames) {
        const auto at = name.find(from(block));
        if (at != std::string::npos) name.replace(at, from(block).size(), to(block));
      }
    }
    break;
  }
  return name;
}

}  // namespace

std::string translated_gpt2_name(std::string name) {
  if (name.starts_with(kTransformerPrefix)) name.erase(0, kTransformerPrefix.size());
  return renamed(std::move(name), true);
}

std::string gpt2_name(const std::string& name) {
  if (name == "lm_head.weight") return name;  // outside the transformer in GPT2LMHeadModel
  return std::string(kTransformerPrefix) + renamed(name, false);
}

bool stored_transposed(const std::string& name) {
  const bool conv1d = name.find(".attn.qkv.") != std::string::npos || name.find(".attn.proj.") != std::string::npos ||
                      name.find(".mlp.fc1.") != std::string::npos || name.find(".mlp.fc2.") != std::string::npos;
  return conv1d && name.ends_with(".weight");
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
