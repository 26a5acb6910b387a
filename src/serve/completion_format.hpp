// The JSON shapes of OpenAI's completions API: the response object, the streamed chunk, the
// usage block and the legacy "logprobs" object, which kael extends with a "bytes" array (one
// list of byte values per token, like the chat API's) because a token can be part of a
// UTF-8 character and its string alone cannot say which bytes it holds.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

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

  // An echoed prompt token: no logprob (nothing precedes the first; kael does not compute the
  // others, since the model returns only the last position's logits).
  void add_prompt_token(std::int32_t id);
  void add(const TokenEvent& event);
  bool empty() const { return tokens_.empty(); }
  Json take();

 private:
  void add_token(std::int32_t id);

  const text::Tokenizer* tokenizer_;
  std::size_t offset_;
  Json tokens_ = Json::array();
  Json token_logprobs_ = Json::array();
  Json top_logprobs_ = Json::array();
  Json text_offset_ = Json::array();
  Json bytes_ = Json::array();
};

}  // namespace kael::serve
