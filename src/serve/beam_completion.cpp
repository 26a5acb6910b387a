#include "serve/beam_completion.hpp"

#include "kael/generate/beam_search.hpp"
#include "serve/choices.hpp"

namespace kael::serve {

Response answer_beam_search(ServerContext& context, const CompletionRequest& request, const CompletionHeader& header) {
  const auto result = generate::beam_search(context.model, request.prompt_ids, request.beams);
  int completion_tokens = 0;
  for (const auto& h : result.sequences) completion_tokens += static_cast<int>(h.ids.size());
  context.metrics.count_prompt_tokens(static_cast<std::int64_t>(result.prompt_ids.size()));
  context.metrics.count_generated_tokens(completion_tokens);
  std::vector<Json> completions;
  for (std::size_t index = 0; index < result.sequences.size(); ++index) {
    const auto& h = result.sequences[index];
    std::vector<std::int32_t> shown = h.ids;
    if (h.finish_reason == "stop") shown.pop_back();  // <|endoftext|> is not text
    const std::string text = (request.echo ? request.prompt_text : std::string()) + context.tokenizer.decode(shown);
    Json one = completion_object(header, text, nullptr, h.finish_reason,
                                 index == 0 ? usage_json(static_cast<int>(result.prompt_ids.size()), completion_tokens)
                                            : Json());
    one["choices"][0]["score"] = h.score;  // the beam's length-penalized score (kael's addition)
    completions.push_back(std::move(one));
  }
  Response response;
  response.set_content(dump(join_choices(std::move(completions))), "application/json");
  return response;
}

}  // namespace kael::serve
