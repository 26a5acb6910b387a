// The seed of a counter-based mask (kernels/random.hpp): one draw of the process-wide generator
// that manual_seed sets, so a mask drawn from it is reproducible and its elements can be drawn
// on any thread in any order.
#pragma once

#include <cstdint>

namespace kael::tensor_detail {

// In [0, 2^63 - 1): the value randint(0, INT64_MAX, {}) would draw, advancing the generator alike.
std::uint64_t draw_seed();

}  // namespace kael::tensor_detail
