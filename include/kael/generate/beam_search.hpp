// Beam search with the semantics of Hugging Face transformers' generate(num_beams=N,
// do_sample=False) (version 5.24): at each step the 2N best continuations of all running
// beams (by summed log-probability) are kept; those ending in <|endoftext|> or at
// max_new_tokens become finished hypotheses if they rank among the first N, scored as
// sum / generated_length ^ length_penalty (generated tokens only, <|endoftext|> included); the
// N best of the others keep running. Stopping follows `early_stopping` (see EarlyStopping).
// The beams of a request share one batched forward step.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kael/model/gpt2.hpp"

namespace kael::generate {

// transformers' early_stopping: when beam search stops before max_new_tokens.
enum class EarlyStopping {
  heuristic,  // false: when no running beam, scored at its current length, beats the worst of N finished
  when_full,  // true: as soon as N hypotheses are finished
  never,      // "never": as `heuristic`, but a positive length penalty scores running beams at max_new_tokens
};

// "false", "true", "never"; nullopt for anything else.
std::optional<EarlyStopping> early_stopping_from_name(std::string_view name);

struct BeamSearchOptions {
  int num_beams = 4;
  float length_penalty = 1.0f;  // exponent of the generated length the score is divided by
  EarlyStopping early_stopping = EarlyStopping::heuristic;
  int num_return_sequences = 1;  // 1 .. num_beams, best first
  int max_new_tokens = 60;       // >= 1
  bool ignore_eos = false;       // <|endoftext|> does not finish a hypothesis
  bool truncate_prompt = false;  // as GenerateOptions::truncate_prompt
  // Applied to each beam's log-probabilities before the scores are summed, as transformers
  // applies its logits processors in beam search.
  int no_repeat_ngram_size = 0;
  std::map<std::int32_t, float> logit_bias;

  // ValueError naming the first value out of range (IndexError for a logit_bias id outside
  // [0, vocab_size) when vocab_size > 0).
  void validate(std::int64_t vocab_size = 0) const;
};

struct BeamHypothesis {
  std::vector<std::int32_t> ids;  // generated ids, ending with <|endoftext|> when it stopped there
  float score = 0.0f;             // sum of log-probabilities / ids.size() ^ length_penalty
  std::string finish_reason;      // "stop" (<|endoftext|>) or "length"
};

struct BeamSearchResult {
  std::vector<std::int32_t> prompt_ids;  // as the model saw it (after truncation)
  std::vector<BeamHypothesis> sequences;  // num_return_sequences of them, best score first
  int steps = 0;                          // forward passes, the prompt's included
};

BeamSearchResult beam_search(const model::GPT2& model, std::span<const std::int32_t> prompt_ids,
                             const BeamSearchOptions& options);

}  // namespace kael::generate
