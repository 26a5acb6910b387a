// kael::Session, the facade of kael.hpp over model::Session: a KV cache the caller steps.
#include "kael/kael.hpp"

namespace kael {

Session::Session(std::shared_ptr<const model::GPT2> model, model::Session session)
    : model_(std::move(model)), session_(std::move(session)) {}

std::span<const float> Session::feed(std::span<const std::int32_t> tokens) { return model_->forward(session_, tokens); }

std::vector<float> Session::feed_all(std::span<const std::int32_t> tokens) {
  std::vector<float> out(tokens.size() * static_cast<std::size_t>(model_->config().vocab_size));  // (T, V)
  model_->forward_all_logits(session_, tokens, out);
  return out;
}

int Session::length() const { return session_.length(); }
int Session::capacity() const { return model_->config().n_positions; }
void Session::reset() { session_.reset(); }

}  // namespace kael
