// The seed of a counter-based mask (kernels/random.hpp): one draw of the process-wide generator
// that manual_seed sets, so a mask drawn from it is reproducible and its elements can be drawn
// on any thread in any order; inside a DropoutStreams scope, that scope's next stream instead.
#pragma once

#include <cstdint>

#include "kernels/random.hpp"

namespace kael::tensor_detail {

// In [0, 2^63 - 1): the value randint(0, INT64_MAX, {}) would draw, advancing the generator alike.
std::uint64_t draw_seed();

// The mask of one dropout with probability p over a tensor whose dimension 0 holds rows of
// row_elements elements each: the DropoutStreams scope's next draw (kael/tensor/dropout_streams.hpp),
// or without one {p, draw_seed()}.
kernels::DropoutMask dropout_mask(double p, std::int64_t row_elements);

}  // namespace kael::tensor_detail
