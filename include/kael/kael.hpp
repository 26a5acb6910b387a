// kael's C++ API: the one header to include. It brings the GPT-2 engine (kael::Model below),
// the tensor library (kael::Tensor's operations and autograd: tensor/ops.hpp, tensor/autograd.hpp;
// docs/tensor.md), its optimizers (kael::optim: SGD, Adam, AdamW, clip_grad_norm_; docs/optim.md)
// and safetensors I/O (io/safetensors.hpp).
//
//   kael::Model model = kael::Model::load("data/gpt2", {.threads = 2});
//   kael::GenerateOptions options;
//   options.max_new_tokens = 40;
//   options.sampling.temperature = 0.8f;
//   options.sampling.top_k = 40;
//   model.generate("Hello, my name is", options, [](std::string_view piece) {
//     std::cout << piece << std::flush;
//     return true;  // false stops early
//   });
//
// Stable API: this header and what it declares, plus the types it names from the headers it
// includes (model::Config, model::WeightDType, generate::GenerateOptions / SamplingParams /
// GenerateResult / PieceCallback, text::Tokenizer, the errors in core/error.hpp). The other
// installed headers are what this one is built on: usable, but they may change between minor
// versions. Nothing under src/ is installed or part of the API. See docs/cpp_api.md.
//
// Errors are exceptions derived from kael::Error (ValueError, TypeError, IndexError); the
// library never prints and never exits.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kael/core/cuda.hpp"
#include "kael/core/error.hpp"
#include "kael/generate/generator.hpp"
#include "kael/model/gpt2.hpp"
#include "kael/io/safetensors.hpp"
#include "kael/nn/generate.hpp"
#include "kael/nn/gpt.hpp"
#include "kael/nn/gpt2_config.hpp"
#include "kael/nn/gpt2_weights.hpp"
#include "kael/nn/layers.hpp"
#include "kael/nn/conv.hpp"
#include "kael/nn/module.hpp"
#include "kael/nn/normalization.hpp"
#include "kael/nn/rnn.hpp"
#include "kael/optim/adadelta.hpp"
#include "kael/optim/adam.hpp"
#include "kael/optim/clip_grad.hpp"
#include "kael/optim/optimizer.hpp"
#include "kael/optim/rmsprop.hpp"
#include "kael/optim/sgd.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/conv.hpp"
#include "kael/tensor/normalization.hpp"
#include "kael/tensor/ops.hpp"
#include "kael/tensor/precision.hpp"
#include "kael/tensor/pool.hpp"
#include "kael/tensor/rnn.hpp"
#include "kael/text/bpe.hpp"
#include "kael/text/split.hpp"
#include "kael/text/tokenizer.hpp"
#include "kael/version.hpp"

namespace kael {

using generate::GenerateOptions;
using generate::GenerateResult;
using generate::PieceCallback;
using generate::SamplingParams;
using model::WeightDType;

struct LoadOptions {
  WeightDType dtype = WeightDType::f32;  // weight storage: f32, f16 (half the bytes) or int8 (about a quarter)
  // Compute threads, the calling thread included. They are shared by the whole process (the
  // last load that sets them wins); 0 leaves the current setting (default: one per physical core).
  int threads = 0;
  std::string device = "cpu";  // the engine's only device; see require_device
  bool mmap = true;            // map model.safetensors and use F32 weights in place where that saves memory
};

// Error unless the engine can run on `device`: it runs on the CPU only (a "cuda" request is an
// Error naming why this machine cannot use the device, parse_device's check in core/device.hpp,
// or else saying the engine runs on the CPU; a name that is no device is a ValueError).
void require_device(std::string_view device);

class Session;

// A GPT-2-family model and its tokenizer. Loaded once, then shared: copies share the same
// weights, and every const call may run on several threads at once.
class Model {
 public:
  // Loads DIR/model.safetensors, DIR/config.json (optional), DIR/vocab.json and DIR/merges.txt.
  // Error for a missing file or an unavailable device, ValueError for a malformed one or bad
  // options (see model::GPT2::load for what a checkpoint must hold).
  static Model load(const std::filesystem::path& dir, const LoadOptions& options = {});

  const model::Config& config() const;
  const text::Tokenizer& tokenizer() const;
  const model::GPT2& gpt2() const;  // the model itself, for the calls this header does not wrap

  // Token ids of `text`, equal to tiktoken's gpt2 encoding; with allow_special, the text
  // "<|endoftext|>" becomes id 50256 (text::kEndOfText).
  std::vector<std::int32_t> tokenize(std::string_view text, bool allow_special = false) const;
  // The text of `ids` (their bytes joined; may end inside a UTF-8 character). IndexError on an unknown id.
  std::string detokenize(std::span<const std::int32_t> ids) const;

  // Generates after the prompt: sampling as options.sampling says (temperature 0 is greedy),
  // until <|endoftext|>, a stop string or options.max_new_tokens. on_piece, when given,
  // receives the text as it becomes safe to show (never half a character, never part of a
  // stop string); returning false stops early. ValueError for an empty prompt, a prompt too
  // long for the context (unless options.truncate_prompt) or options out of range.
  GenerateResult generate(std::string_view prompt, const GenerateOptions& options = {},
                          const PieceCallback& on_piece = nullptr) const;
  GenerateResult generate(std::span<const std::int32_t> prompt_ids, const GenerateOptions& options = {},
                          const PieceCallback& on_piece = nullptr) const;

  // The logits that follow `ids` ((vocab_size), the last position only).
  std::vector<float> logits(std::span<const std::int32_t> ids) const;
  // The logits at every position of `ids`, in one forward pass ((ids.size(), vocab_size),
  // row-major; row t follows ids[t]).
  std::vector<float> logits_all(std::span<const std::int32_t> ids) const;

  // A new sequence with its own KV cache, for callers who step the model themselves.
  Session session() const;

 private:
  Model() = default;  // only load() makes one
  std::shared_ptr<const model::GPT2> gpt2_;
  std::shared_ptr<const text::Tokenizer> tokenizer_;
};

// One sequence's KV cache. Each feed() runs only the new tokens, attending to every earlier
// one, so decoding token by token costs one position per step. It keeps its model alive.
// A session is used by one thread at a time; different sessions may run at once.
class Session {
 public:
  // Appends `tokens` and returns the logits after the last of them ((vocab_size), valid until
  // the next call). ValueError past the context (with the counts), IndexError on an id outside
  // the vocabulary; nothing changes when it throws.
  std::span<const float> feed(std::span<const std::int32_t> tokens);
  std::span<const float> feed(std::int32_t token) { return feed(std::span<const std::int32_t>(&token, 1)); }
  // Appends `tokens` and returns the logits at each of their positions ((tokens.size(), vocab_size)).
  std::vector<float> feed_all(std::span<const std::int32_t> tokens);

  int length() const;    // positions in the cache
  int capacity() const;  // the most it can hold (n_positions)
  void reset();          // forget every position

 private:
  friend class Model;
  Session(std::shared_ptr<const model::GPT2> model, model::Session session);
  std::shared_ptr<const model::GPT2> model_;
  model::Session session_;
};

}  // namespace kael
