// The GPT-2 model: configuration, weights loaded from a safetensors checkpoint, and the
// forward pass with a KV cache (SPEC sections 3 and 4).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kael/core/tensor.hpp"

namespace kael::model {

struct Config {
  int n_layer = 12;
  int n_head = 12;
  int n_embd = 768;
  int n_positions = 1024;
  int vocab_size = 50257;
  float layer_norm_epsilon = 1e-5f;
  int n_inner = 0;                 // MLP width; 0 means 4 * n_embd (config.json's null)
  bool tie_word_embeddings = true;  // false: the output head is lm_head.weight, not wte

  int head_dim() const { return n_embd / n_head; }
  int mlp_dim() const { return n_inner > 0 ? n_inner : 4 * n_embd; }
  // ValueError unless every size is positive, n_embd divides into n_head heads, eps is
  // positive and the sizes are within what kael can allocate and index. `source` starts the message.
  void validate(std::string_view source = "config") const;

  // Parses config.json text; `source` names it in messages. Absent keys keep GPT-2 small's
  // values. ValueError on bad JSON or values, or on what kael does not implement (an
  // activation other than gelu_new, model_type other than gpt2, unscaled or layer-scaled
  // attention, cross-attention).
  static Config from_json(std::string_view json, std::string_view source = "config.json");
  // Reads config.json (Error when it cannot be read; ValueError as from_json).
  static Config from_json_file(const std::filesystem::path& path);
  // DIR/config.json when present, GPT-2 small defaults when not.
  static Config from_directory(const std::filesystem::path& dir);
};

struct LoadOptions {
  // Map model.safetensors (see kael::io::LoadOptions) so F32 weights are used in place. The
  // file is read instead, mmap or not, when mapping cannot save memory: data misaligned for
  // floats (as in the published gpt2 file) or mostly F16/BF16 weights, which are converted.
  bool mmap = true;
};

class Session;

// Threads the forward pass computes on, the calling thread included; n <= 0 means one per
// hardware thread (the default). Results do not depend on it. Call it between forward passes.
void set_num_threads(int n);
int num_threads();

class GPT2 {
 public:
  // Loads DIR/model.safetensors with DIR/config.json (if present).
  // Parameters are matched by their Hugging Face names, with or without the "transformer."
  // prefix; the causal-mask buffers (attn.bias, attn.masked_bias) and a tied lm_head.weight
  // are ignored; F16, BF16 and F64 are converted to F32. Error for a missing parameter,
  // ValueError for a wrong shape (expected vs found) or an unexpected tensor, TypeError for a
  // non-floating dtype. Nothing is kept from a load that fails.
  static GPT2 load(const std::filesystem::path& dir, const LoadOptions& options = {});
  // The same from tensors already in memory (named as in a checkpoint file); `source` names
  // them in messages. F32 tensors are used in place, without a copy.
  static GPT2 from_tensors(const Config& config, std::map<std::string, Tensor> tensors,
                           std::string_view source = "checkpoint");
  GPT2(GPT2&&) noexcept;
  GPT2& operator=(GPT2&&) noexcept;
  ~GPT2();

  const Config& config() const;
  // Parameters held (the tied head counted once): 124,439,808 for GPT-2 small.
  std::int64_t parameter_count() const;

  // A new sequence state (KV cache and scratch buffers for up to n_positions tokens).
  Session new_session() const;

  // Feeds `tokens` at the session's next positions, appending them to its KV cache, and
  // returns the logits of the last of them ([vocab_size], valid until the next call).
  // ValueError when the sequence would pass n_positions (the message gives the counts);
  // IndexError on an id outside the vocabulary. Nothing changes when it throws. Calls with
  // different sessions may run on several threads at once.
  std::span<const float> forward(Session& session, std::span<const std::int32_t> tokens) const;

  struct Impl;

 private:
  explicit GPT2(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// One sequence's state: its KV cache and the number of positions it holds.
class Session {
 public:
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  ~Session();
  int length() const;  // positions already in the cache
  void reset();        // forget every position

  struct State;

 private:
  friend class GPT2;
  explicit Session(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace kael::model
