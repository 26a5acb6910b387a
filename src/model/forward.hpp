// The forward pass of SPEC section 4, one chunk of new positions at a time (llm.c style:
// flat layer functions over raw buffers, shapes in comments).
#pragma once

#include <cstdint>

#include "model/state.hpp"
#include "model/weights.hpp"

namespace kael::model {

// Runs tokens (T <= kChunk, already validated) at positions state.length .. + T - 1, appending
// their keys and values to the cache; with want_logits, fills state.logits for the last one.
void forward_chunk(const Config& config, const Weights& weights, Session::State& state, const std::int32_t* tokens,
                   std::int64_t T, bool want_logits);

}  // namespace kael::model
