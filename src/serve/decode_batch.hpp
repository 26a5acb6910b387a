// One decode step for the whole running batch: every session takes one new token at its own
// position, in one GPT2::forward_batch pass (one matrix-matrix product per weight instead of
// one matrix-vector product per sequence). The scheduler calls only this, so how the batch is
// run is decided here alone.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kael/model/gpt2.hpp"

namespace kael::serve {

// Whether decode_batch runs the batch as one forward pass (reported by /health, so a client
// or test knows whether to expect throughput to grow with the batch).
inline constexpr bool kBatchedDecode = true;

// Feeds tokens[i] to sessions[i] and returns each session's next-token logits ([vocab_size],
// valid until that session's next forward). Throws what GPT2::forward throws.
std::vector<std::span<const float>> decode_batch(const model::GPT2& model, std::span<model::Session* const> sessions,
                                                 std::span<const std::int32_t> tokens);

}  // namespace kael::serve
