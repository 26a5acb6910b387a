#include "kael/generate/prompt_logprobs.hpp"

#include "kael/core/error.hpp"

namespace kael::generate {

std::vector<PromptTokenScore> score_prompt(const model::GPT2& model, std::span<const std::int32_t> ids, int top_n) {
  if (top_n < 0) throw ValueError(str("top_n must be >= 0, found ", top_n));
  std::vector<PromptTokenScore> out;
  if (ids.size() < 2) {
    if (ids.empty()) throw ValueError("score_prompt: the prompt is empty");
    return out;
  }
  out.reserve(ids.size() - 1);
  model::Session session = model.new_session();
  // The last position predicts past the prompt: it scores nothing, so it is not fed.
  model.forward_every_position(session, ids.first(ids.size() - 1), [&](std::size_t i, std::span<const float> logits) {
    PromptTokenScore score;
    score.logprob = logprob_of(logits, ids[i + 1]);
    if (top_n > 0) score.top = top_logprobs(logits, top_n);
    out.push_back(std::move(score));
  });
  return out;
}

}  // namespace kael::generate
