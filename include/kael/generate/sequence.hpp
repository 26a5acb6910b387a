// One sequence's generation state, advanced one token at a time. It knows nothing of the
// model: the caller feeds pending() to the model (in a batch with other sequences if it
// likes) and hands the resulting logits to accept(). This is what a server drives when
// requests join and leave at token boundaries; generate() (generator.hpp) is the one-sequence loop.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kael/generate/sampling.hpp"
#include "kael/generate/stop.hpp"
#include "kael/text/tokenizer.hpp"

namespace kael::generate {

struct GenerateOptions {
  SamplingParams sampling;
  int max_new_tokens = 60;
  std::vector<std::string> stop;  // stop strings, matched on the decoded text
  bool ignore_eos = false;        // keep going after <|endoftext|>
  bool truncate_prompt = false;   // cut the prompt from the left to fit n_positions
  bool logprobs = false;          // compute each chosen token's log-probability
  int top_logprobs = 0;           // and this many most likely alternatives per step
};

// The prompt the model will see: unchanged when prompt + max_new_tokens fits in n_positions;
// otherwise its last (n_positions - max_new_tokens) ids with `truncate`, and a ValueError
// giving the counts without. ValueError on an empty prompt.
std::vector<std::int32_t> fit_prompt(std::span<const std::int32_t> prompt, int max_new_tokens, int n_positions,
                                     bool truncate);

// What one accept() produced.
struct Step {
  std::int32_t token = -1;
  // Log-probabilities under the model's own distribution (the logits before any penalty or
  // warper), filled when GenerateOptions::logprobs / top_logprobs ask for them.
  float logprob = 0.0f;
  std::vector<TokenLogprob> top_logprobs;
  std::string text;  // text that became safe to emit (UTF-8 complete, no stop-string prefix)
  bool finished = false;
};

class Sequence {
 public:
  // Validates the options and fits the prompt (see fit_prompt). `tokenizer` must outlive this.
  Sequence(const text::Tokenizer& tokenizer, std::span<const std::int32_t> prompt_ids, const GenerateOptions& options,
           int n_positions);

  // The ids to feed the model before the next accept(): the prompt first, then the last
  // generated token. Empty once finished.
  std::span<const std::int32_t> pending() const;
  // Takes the logits that followed pending() (the last position's, [vocab_size]), chooses
  // the next token and updates the text. Error when called after the sequence finished.
  Step accept(std::span<const float> logits);
  // Ends the sequence early (a client went away, a callback said stop); returns the
  // held-back text, which the caller may drop.
  std::string cancel();

  bool finished() const { return !finish_reason_.empty(); }
  // "" while running, then "stop" (<|endoftext|> or a stop string), "length" (max_new_tokens
  // reached) or "cancelled".
  const std::string& finish_reason() const { return finish_reason_; }
  const std::vector<std::int32_t>& prompt_ids() const { return prompt_; }
  // Generated ids, including the <|endoftext|> or the token that completed a stop string.
  const std::vector<std::int32_t>& ids() const { return ids_; }
  // Every piece of text returned so far (generated text only; no <|endoftext|>, no stop string).
  const std::string& text() const { return text_; }

 private:
  std::string finish(std::string reason);

  GenerateOptions options_;
  Sampler sampler_;
  text::StreamDecoder decoder_;
  StopMatcher stop_;
  std::vector<std::int32_t> prompt_;
  std::vector<std::int32_t> ids_;
  std::vector<std::int32_t> pending_;
  std::vector<float> scratch_;  // logits copy the processors modify
  std::string text_;
  std::string finish_reason_;
};

}  // namespace kael::generate
