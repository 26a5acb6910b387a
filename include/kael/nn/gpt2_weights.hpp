// GPT-2 checkpoints (Hugging Face's names and Conv1D layout) into kael::nn::GPT.
#pragma once

#include <filesystem>
#include <string>

#include "kael/nn/gpt.hpp"

namespace kael::nn {

// kael's name for a GPT-2 checkpoint name: a leading "transformer." dropped, then
// wte -> token_embedding, wpe -> position_embedding, ln_f -> ln_final, h.{i} -> blocks.{i} with
// ln_1/ln_2 -> ln1/ln2, attn.c_attn/c_proj -> attn.qkv/proj, mlp.c_fc/c_proj -> mlp.fc1/fc2.
// Names with no kael counterpart (h.{i}.attn.bias, lm_head.weight) come back translated but
// match no parameter.
std::string translated_gpt2_name(std::string name);
// Whether the tensor of (translated) `name` is a Conv1D weight, stored (in, out): the four
// projection weights of each block. Linear stores (out, in).
bool stored_transposed(const std::string& name);
// Loads GPT-2 weights from a safetensors file into `model` (whose config must match the
// checkpoint's sizes): names translated, Conv1D weights transposed, entries the model lacks
// dropped, then Module::load_state_dict (so a failed load changes nothing).
void load_gpt2_weights(GPT& model, const std::filesystem::path& path);

}  // namespace kael::nn
