// The GPT-2 model: configuration, weights loaded from a safetensors checkpoint, and the
// forward pass with a KV cache (SPEC sections 3 and 4).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

namespace kael::model {

struct Config {
  int n_layer = 12;
  int n_head = 12;
  int n_embd = 768;
  int n_positions = 1024;
  int vocab_size = 50257;
  float layer_norm_epsilon = 1e-5f;

  int head_dim() const { return n_embd / n_head; }
  // Reads config.json (ValueError on bad values or an unsupported activation).
  static Config from_json_file(const std::filesystem::path& path);
  // DIR/config.json when present, GPT-2 small defaults when not.
  static Config from_directory(const std::filesystem::path& dir);
};

struct LoadOptions {
  bool mmap = true;
};

class Session;

class GPT2 {
 public:
  // Loads DIR/model.safetensors with DIR/config.json (if present).
  static GPT2 load(const std::filesystem::path& dir, const LoadOptions& options = {});
  GPT2(GPT2&&) noexcept;
  GPT2& operator=(GPT2&&) noexcept;
  ~GPT2();

  const Config& config() const;

  // A new sequence state (KV cache and scratch buffers for up to n_positions tokens).
  Session new_session() const;

  // Feeds `tokens` at the session's next positions, appending them to its KV cache, and
  // returns the logits of the last of them ([vocab_size], valid until the next call).
  // ValueError when the sequence would pass n_positions (the message gives the counts);
  // IndexError on an id outside the vocabulary.
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
