#include "kael/generate/prompt_logprobs.hpp"

#include <algorithm>

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
  // The last position predicts past the prompt: it scores nothing, so it is not fed. Pieces
  // of kPiece positions keep the logits buffer small (kPiece x vocab floats) for any prompt.
  constexpr std::size_t kPiece = 64;
  const auto V = static_cast<std::size_t>(model.config().vocab_size);
  const auto fed = ids.first(ids.size() - 1);
  std::vector<float> logits;
  for (std::size_t begin = 0; begin < fed.size(); begin += kPiece) {
    const auto piece = fed.subspan(begin, std::min(kPiece, fed.size() - begin));
    logits.resize(piece.size() * V);
    model.forward_all_logits(session, piece, logits);  // (piece, V)
    for (std::size_t t = 0; t < piece.size(); ++t) {
      const std::span<const float> row(logits.data() + t * V, V);
      PromptTokenScore score;
      score.logprob = logprob_of(row, ids[begin + t + 1]);
      if (top_n > 0) score.top = top_logprobs(row, top_n);
      out.push_back(std::move(score));
    }
  }
  return out;
}

}  // namespace kael::generate
