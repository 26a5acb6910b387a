// The generation loop for one sequence: prefill the prompt, then sample token by token until
// <|endoftext|>, a stop string or max_new_tokens, streaming text as it becomes safe to show.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kael/generate/sequence.hpp"
#include "kael/model/gpt2.hpp"
#include "kael/text/tokenizer.hpp"

namespace kael::generate {

struct Timings {
  int prompt_tokens = 0;
  double prefill_ms = 0.0;  // the prompt's forward pass and the first token's choice
  int decode_steps = 0;     // forward passes after the prefill
  double decode_ms = 0.0;
  double decode_tokens_per_second() const { return decode_ms > 0.0 ? decode_steps * 1000.0 / decode_ms : 0.0; }
  double prefill_tokens_per_second() const { return prefill_ms > 0.0 ? prompt_tokens * 1000.0 / prefill_ms : 0.0; }
};

struct GenerateResult {
  std::vector<std::int32_t> prompt_ids;  // as the model saw it (after truncation)
  std::vector<std::int32_t> ids;         // generated ids
  std::string text;                      // generated text only
  std::string finish_reason;             // "stop", "length" or "cancelled"
  Timings timings;
};

// Receives each piece of text as soon as it is safe to show; returning false stops early.
using PieceCallback = std::function<bool(std::string_view piece)>;

GenerateResult generate(const model::GPT2& model, const text::Tokenizer& tokenizer,
                        std::span<const std::int32_t> prompt_ids, const GenerateOptions& options,
                        const PieceCallback& on_piece = nullptr);

}  // namespace kael::generate
