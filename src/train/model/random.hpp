// The training step's random numbers are the kernels' counter-based ones (kernels/random.hpp):
// the dropout masks its attention kernels and element-wise passes apply, and the initial weights.
#pragma once

#include "kernels/random.hpp"

namespace kael::train {

using kernels::DropoutMask;
using kernels::mix64;
using kernels::random_word;
using kernels::standard_normal;
using kernels::uniform_float;

}  // namespace kael::train
