// GPT-2 checkpoints (Hugging Face's names and Conv1D layout) into kael::nn::GPT, and back.
#pragma once

#include <filesystem>
#include <string>

#include "kael/io/safetensors.hpp"
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

// The GPT-2 name of kael parameter `name`, as GPT2LMHeadModel.save_pretrained writes it:
// "transformer." + the inverse of translated_gpt2_name (lm_head.weight, present only when the
// head is not tied, keeps its name).
std::string gpt2_name(const std::string& name);
// The model's parameters under GPT-2's names and layout (Conv1D weights transposed back to
// (in, out)): what transformers' GPT2LMHeadModel loads. ValueError for a model without biases,
// which GPT-2's layout cannot express.
io::TensorMap gpt2_state_dict(const GPT& model);
// gpt2_state_dict written to a safetensors file (atomically, with the metadata {"format": "pt"}
// that transformers expects). The config.json beside it is the caller's: GPT2Config with
// n_embd, n_layer, n_head, n_positions, vocab_size, layer_norm_epsilon and tie_word_embeddings
// equal to the model's.
void save_gpt2_weights(const GPT& model, const std::filesystem::path& path);

}  // namespace kael::nn
