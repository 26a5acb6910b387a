#include "kael/text/tokenizer.hpp"
#include "kael/core/utf8.hpp"

namespace kael::text {

std::string StreamDecoder::push(std::int32_t id) {
  pending_ += tokenizer_->token_bytes(id);  // IndexError leaves the pending bytes as they were
  const std::size_t hold = utf8::incomplete_tail(pending_);
  std::string ready = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return ready;
}

std::string StreamDecoder::flush() {
  std::string rest;
  rest.swap(pending_);
  return rest;
}

}  // namespace kael::text
