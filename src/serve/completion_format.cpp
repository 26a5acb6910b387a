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

void LogprobsBuilder::add_token(std::string_view bytes) {
  tokens_.push_back(token_string(bytes));
  bytes_.push_back(byte_values(bytes));
  text_offset_.push_back(offset_);
  offset_ += char_count(bytes);
}

void LogprobsBuilder::add_prompt_token(std::int32_t id) {
  add_token(tokenizer_->token_bytes(id));
  token_logprobs_.push_back(nullptr);
  top_logprobs_.push_back(nullptr);
}

void LogprobsBuilder::add_prompt_token(const TokenEvent& scored) {
  release(scored, tokenizer_->token_bytes(scored.id));
}

void LogprobsBuilder::add(const TokenEvent& event) {
  last_id_ = event.id;
  held_.push_back(event);
  cover(0);
}

void LogprobsBuilder::cover(std::size_t bytes) {
  covered_ += bytes;
  std::size_t released = 0;
  for (; released < held_.size(); ++released) {
    const std::string_view token = tokenizer_->token_bytes(held_[released].id);
    if (token.size() > covered_) break;
    covered_ -= token.size();
    release(held_[released], token);
  }
  held_.erase(held_.begin(), held_.begin() + static_cast<std::ptrdiff_t>(released));
}

void LogprobsBuilder::finish(bool cut_by_stop) {
  if (cut_by_stop) {
    // The text ends `covered_` bytes into the first held token (never past it: cover()
    // released every token the text covers whole).
    if (!held_.empty() && covered_ > 0) release(held_.front(), tokenizer_->token_bytes(held_.front().id).substr(0, covered_));
  } else {
    for (const TokenEvent& event : held_) release(event, tokenizer_->token_bytes(event.id));
  }
  held_.clear();
  covered_ = 0;
}

void LogprobsBuilder::release(const TokenEvent& event, std::string_view bytes) {
  add_token(bytes);
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
