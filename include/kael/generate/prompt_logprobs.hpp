// Scoring a prompt: the log-probability the model gives each prompt token after the ones
// before it (what evaluation harnesses ask a completions server for with echo + logprobs).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kael/generate/sampling.hpp"
#include "kael/model/gpt2.hpp"

namespace kael::generate {

struct PromptTokenScore {
  float logprob = 0.0f;            // log_softmax(logits after ids[..i])[ids[i]]
  std::vector<TokenLogprob> top;   // the top_n most likely tokens there, highest first
};

// One entry for each of ids[1..] (nothing precedes ids[0]), from one forward pass that keeps
// the logits of every position. ValueError/IndexError as GPT2::forward.
std::vector<PromptTokenScore> score_prompt(const model::GPT2& model, std::span<const std::int32_t> ids, int top_n);

}  // namespace kael::generate
