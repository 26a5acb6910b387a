// The JSON shapes of OpenAI's completions API: the response object, the streamed chunk, the
// usage block and the legacy "logprobs" object, which kael extends with a "bytes" array (one
// list of byte values per token, like the chat API's) because a token can be part of a
// UTF-8 character and its string alone cannot say which bytes it holds.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kael/text/tokenizer.hpp"
#include "serve/job.hpp"
#include "serve/json_text.hpp"

namespace kael::serve {

// What every object of one completion shares.
struct CompletionHeader {
  std::string id;  // "cmpl-..."
  std::int64_t created = 0;  // Unix seconds
  std::string model;
};

// {"id", "object": "text_completion", "created", "model", "choices": [{"text", "index": 0,
// "logprobs", "finish_reason"}]}, plus "usage" when `usage` is not null. A streamed chunk has
// the same shape with finish_reason null until the last.
Json completion_object(const CompletionHeader& header, std::string_view text, Json logprobs, Json finish_reason,
                       Json usage);

Json usage_json(int prompt_tokens, int completion_tokens);

// Builds the logprobs object token by token; take() hands over what was added since the last
// take() (one streamed chunk's worth). text_offset counts characters of prompt + completion,
// as OpenAI's does.
class LogprobsBuilder {
 public:
  LogprobsBuilder(const text::Tokenizer& tokenizer, std::size_t start_offset)
      : tokenizer_(&tokenizer), offset_(start_offset) {}

  // The echoed prompt's first token: no logprob, since nothing precedes it.
  void add_prompt_token(std::int32_t id);
  // An echoed prompt token with its score. Released at once: the prompt's text is always
  // emitted whole, so nothing is held for it.
  void add_prompt_token(const TokenEvent& scored);
  // A generated token: held until the completion's text covers its bytes (see cover), so the
  // tokens handed out always spell exactly the text handed out.
  void add(const TokenEvent& event);
  // `bytes` more bytes of completion text were emitted.
  void cover(std::size_t bytes);
  // The completion ended. With `cut_by_stop`, its text ends inside the tokens (a stop string
  // matched): the token holding the cut keeps only its bytes before it, later ones are dropped.
  // Otherwise every held token is released (the <|endoftext|> token, which is not text).
  void finish(bool cut_by_stop);
  // The last generated token added (-1 before any).
  std::int32_t last_id() const { return last_id_; }
  bool empty() const { return tokens_.empty(); }
  Json take();

 private:
  void add_token(std::string_view bytes);
  void release(const TokenEvent& event, std::string_view bytes);

  const text::Tokenizer* tokenizer_;
  std::size_t offset_;
  Json tokens_ = Json::array();
  Json token_logprobs_ = Json::array();
  Json top_logprobs_ = Json::array();
  Json text_offset_ = Json::array();
  Json bytes_ = Json::array();
  std::vector<TokenEvent> held_;  // generated tokens not yet covered by text, in order
  std::size_t covered_ = 0;       // emitted text bytes past the released tokens
  std::int32_t last_id_ = -1;
};

}  // namespace kael::serve
