#include "kael/nn/gpt2_config.hpp"

#include "kael/core/error.hpp"

namespace kael::nn {

GptConfig gpt_config(const model::Config& config) {
  if (config.mlp_dim() != 4 * config.n_embd)
    throw ValueError(str("config.json: nn::GPT's MLP is 4 * n_embd = ", 4 * config.n_embd, " wide, this one is ",
                         config.mlp_dim()));
  GptConfig out{.vocab_size = config.vocab_size,
                .n_positions = config.n_positions,
                .n_layer = config.n_layer,
                .n_head = config.n_head,
                .n_embd = config.n_embd,
                .tied_embeddings = config.tie_word_embeddings,
                .layer_norm_eps = config.layer_norm_epsilon};
  out.validate();
  return out;
}

model::Config model_config(const GptConfig& config) {
  config.validate();
  if (!config.tanh_gelu || !config.bias)
    throw ValueError("GptConfig: GPT-2's config.json has the tanh GELU and biases; this shape has "
                     + std::string(config.tanh_gelu ? "no biases" : "the exact GELU"));
  model::Config out;
  out.n_layer = static_cast<int>(config.n_layer);
  out.n_head = static_cast<int>(config.n_head);
  out.n_embd = static_cast<int>(config.n_embd);
  out.n_positions = static_cast<int>(config.n_positions);
  out.vocab_size = static_cast<int>(config.vocab_size);
  out.layer_norm_epsilon = static_cast<float>(config.layer_norm_eps);
  out.tie_word_embeddings = config.tied_embeddings;
  out.validate("GptConfig");
  return out;
}

}  // namespace kael::nn
