// One GPT-2 shape, two spellings: the engine's model::Config (config.json's names) and the
// book's nn::GptConfig. The conversion is written once, here.
#pragma once

#include "kael/model/gpt2.hpp"
#include "kael/nn/gpt.hpp"

namespace kael::nn {

// The nn::GPT of a checkpoint's shape (GPT-2's tanh GELU, biases, no dropout). ValueError for an
// MLP width other than 4 * n_embd, which nn::GPT does not have.
GptConfig gpt_config(const model::Config& config);
// The engine's Config of the same shape (config.json via Config::to_json). ValueError for what
// GPT-2's config.json cannot say: the exact GELU, no biases. (Dropout, a training setting, is
// not carried.)
model::Config model_config(const GptConfig& config);

}  // namespace kael::nn
