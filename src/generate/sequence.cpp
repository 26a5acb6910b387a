// Sequence: the per-sequence state machine behind generate() and the server (sequence.hpp).
#include "kael/generate/sequence.hpp"

#include "kael/core/error.hpp"

namespace kael::generate {

std::vector<std::int32_t> fit_prompt(std::span<const std::int32_t> prompt, int max_new_tokens, int n_positions,
                                     bool truncate) {
  if (prompt.empty()) throw ValueError("the prompt is empty: generation needs at least one prompt token");
  if (max_new_tokens < 0) throw ValueError(str("max_new_tokens must be >= 0, found ", max_new_tokens));
  if (n_positions <= 0) throw ValueError(str("the model's context must be positive, found ", n_positions));
  const std::size_t limit = static_cast<std::size_t>(n_positions);
  const std::size_t wanted = static_cast<std::size_t>(max_new_tokens);
  if (prompt.size() + wanted <= limit) return {prompt.begin(), prompt.end()};
  if (!truncate)
    throw ValueError(str("the prompt (", prompt.size(), " tokens) plus max_new_tokens (", max_new_tokens, ") is ",
                         prompt.size() + wanted, " tokens, past the model's context of ", n_positions,
                         " positions; truncate the prompt or ask for fewer tokens"));
  if (wanted >= limit)
    throw ValueError(str("max_new_tokens (", max_new_tokens, ") leaves no room for the prompt in the model's context of ",
                         n_positions, " positions"));
  // Left truncation: the most recent tokens matter most for what comes next.
  return {prompt.end() - static_cast<std::ptrdiff_t>(limit - wanted), prompt.end()};
}

Sequence::Sequence(const text::Tokenizer& tokenizer, std::span<const std::int32_t> prompt_ids,
                   const GenerateOptions& options, int n_positions)
    : options_(options),
      sampler_(options.sampling),
      decoder_(tokenizer),
      stop_(options.stop),
      prompt_(fit_prompt(prompt_ids, options.max_new_tokens, n_positions, options.truncate_prompt)) {
  if (options_.top_logprobs < 0) throw ValueError(str("top_logprobs must be >= 0, found ", options_.top_logprobs));
  sampler_.add_prompt(prompt_);
  pending_ = prompt_;
  if (options_.max_new_tokens == 0) finish("length");
}

std::span<const std::int32_t> Sequence::pending() const { return pending_; }

Step Sequence::accept(std::span<const float> logits) {
  if (finished()) throw Error(str("accept() called on a sequence that already finished (", finish_reason_, ")"));
  if (logits.empty()) throw ValueError("accept() needs the logits of the last position, found none");
  Step step;
  scratch_.assign(logits.begin(), logits.end());
  step.token = sampler_.sample(scratch_);
  if (options_.logprobs) step.logprob = logprob_of(logits, step.token);
  if (options_.top_logprobs > 0) step.top_logprobs = top_logprobs(logits, options_.top_logprobs);
  sampler_.add_generated(step.token);
  ids_.push_back(step.token);
  pending_.assign(1, step.token);

  if (step.token == text::kEndOfText && !options_.ignore_eos) {
    step.text = finish("stop");  // <|endoftext|> itself is not text
  } else {
    step.text = stop_.push(decoder_.push(step.token));
    if (stop_.stopped())
      step.text += finish("stop");
    else if (ids_.size() >= static_cast<std::size_t>(options_.max_new_tokens))
      step.text += finish("length");
  }
  text_ += step.text;
  step.finished = finished();
  return step;
}

std::string Sequence::cancel() {
  if (finished()) return {};
  std::string rest = finish("cancelled");
  text_ += rest;
  return rest;
}

// Marks the end and returns the text still held back by the UTF-8 decoder and the stop
// matcher (none when a stop string matched: what followed it is dropped).
std::string Sequence::finish(std::string reason) {
  finish_reason_ = std::move(reason);
  pending_.clear();
  if (stop_.stopped()) return {};
  std::string out = stop_.push(decoder_.flush());
  if (!stop_.stopped()) out += stop_.flush();
  return out;
}

}  // namespace kael::generate
