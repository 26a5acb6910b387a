#include "kael/nn/gpt2_weights.hpp"

#include "kael/io/safetensors.hpp"

namespace kael::nn {

std::string translated_gpt2_name(std::string name) {
  const std::string prefix = "transformer.";
  if (name.starts_with(prefix)) name.erase(0, prefix.size());
  const auto replace = [&](const std::string& from, const std::string& to) {
    const auto at = name.find(from);
    if (at != std::string::npos) name.replace(at, from.size(), to);
  };
  if (name.starts_with("wte.")) {
    replace("wte.", "token_embedding.");
  } else if (name.starts_with("wpe.")) {
    replace("wpe.", "position_embedding.");
  } else if (name.starts_with("ln_f.")) {
    replace("ln_f.", "ln_final.");
  } else if (name.starts_with("h.")) {
    name.replace(0, 2, "blocks.");
    // Dots on both sides: .attn.c_proj. and .mlp.c_proj. cannot be confused.
    replace(".ln_1.", ".ln1.");
    replace(".ln_2.", ".ln2.");
    replace(".attn.c_attn.", ".attn.qkv.");
    replace(".attn.c_proj.", ".attn.proj.");
    replace(".mlp.c_fc.", ".mlp.fc1.");
    replace(".mlp.c_proj.", ".mlp.fc2.");
  }
  return name;
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

}  // namespace kael::nn
