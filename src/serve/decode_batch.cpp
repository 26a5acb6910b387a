// decode_batch (decode_batch.hpp).
#include "serve/decode_batch.hpp"

#include "kael/core/error.hpp"

namespace kael::serve {

std::vector<std::span<const float>> decode_batch(const model::GPT2& model, std::span<model::Session* const> sessions,
                                                 std::span<const std::int32_t> tokens) {
  if (sessions.size() != tokens.size())
    throw ValueError(str("decode_batch: ", sessions.size(), " sessions but ", tokens.size(), " tokens"));
  if (sessions.empty()) return {};
  // One pass for the whole batch: every weight matrix is read once for all the new tokens
  // (a matrix-matrix product) instead of once per sequence. Bit for bit equal to calling
  // forward() per session, so batching never changes what a request generates.
  return model.forward_batch(sessions, tokens);
}

}  // namespace kael::serve
