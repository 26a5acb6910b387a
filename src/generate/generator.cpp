// generate(): one Sequence driven through the model, timed, its text streamed to a callback.
#include "kael/generate/generator.hpp"

#include <chrono>

namespace kael::generate {
namespace {

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

GenerateResult generate(const model::GPT2& model, const text::Tokenizer& tokenizer,
                        std::span<const std::int32_t> prompt_ids, const GenerateOptions& options,
                        const PieceCallback& on_piece) {
  Sequence sequence(tokenizer, prompt_ids, options, model.config().n_positions);
  model::Session session = model.new_session();
  GenerateResult result;
  result.timings.prompt_tokens = static_cast<int>(sequence.prompt_ids().size());

  bool first = true;
  while (!sequence.finished()) {
    const auto start = std::chrono::steady_clock::now();
    const Step step = sequence.accept(model.forward(session, sequence.pending()));
    if (first) {
      result.timings.prefill_ms = ms_since(start);
      first = false;
    } else {
      result.timings.decode_ms += ms_since(start);
      ++result.timings.decode_steps;
    }
    if (on_piece && !step.text.empty() && !on_piece(step.text)) sequence.cancel();
  }

  result.prompt_ids = sequence.prompt_ids();
  result.ids = sequence.ids();
  result.text = sequence.text();
  result.finish_reason = sequence.finish_reason();
  return result;
}

}  // namespace kael::generate
