// OpenAI completion JSON (completion_format.hpp).
#include "serve/completion_format.hpp"

namespace kael::serve {
namespace {

Json byte_values(std::string_view bytes) {
  Json out = Json::array();
  for (const unsigned char c : bytes) out.push_back(c);
  return out;
}

}  // namespace

Json completion_object(const CompletionHeader& header, std::string_view text, Json logprobs, Json finish_reason,
                       Json usage) {
  Json choice = {{"text", text}, {"index", 0}, {"logprobs", std::move(logprobs)}, {"finish_reason", std::move(finish_reason)}};
  Json out = {{"id", header.id},
              {"object", "text_completion"},
              {"created", header.created},
              {"model", header.model},
              {"choices", Json::array({std::move(choice)})}};
  if (!usage.is_null()) out["usage"] = std::move(usage);
  return out;
}

Json usage_json(int prompt_tokens, int completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

void LogprobsBuilder::add_token(std::int32_t id) {
  const std::string_view bytes = tokenizer_->token_bytes(id);
  tokens_.push_back(token_string(bytes));
  bytes_.push_back(byte_values(bytes));
  text_offset_.push_back(offset_);
  offset_ += char_count(bytes);
}

void LogprobsBuilder::add_prompt_token(std::int32_t id) {
  add_token(id);
  token_logprobs_.push_back(nullptr);
  top_logprobs_.push_back(nullptr);
}

void LogprobsBuilder::add(const TokenEvent& event) {
  add_token(event.id);
  token_logprobs_.push_back(event.logprob);
  Json top = Json::object();
  for (const auto& alternative : event.top)
    top[token_string(tokenizer_->token_bytes(alternative.id))] = alternative.logprob;
  top_logprobs_.push_back(std::move(top));
}

Json LogprobsBuilder::take() {
  Json out = {{"tokens", std::move(tokens_)},
              {"token_logprobs", std::move(token_logprobs_)},
              {"top_logprobs", std::move(top_logprobs_)},
              {"text_offset", std::move(text_offset_)},
              {"bytes", std::move(bytes_)}};
  tokens_ = Json::array();
  token_logprobs_ = Json::array();
  top_logprobs_ = Json::array();
  text_offset_ = Json::array();
  bytes_ = Json::array();
  return out;
}

}  // namespace kael::serve
