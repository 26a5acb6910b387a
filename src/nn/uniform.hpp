// The layers' initialization draw, shared by every file of kael::nn.
#pragma once

#include "kael/core/tensor.hpp"

namespace kael::nn::detail {

// Uniform in [-bound, bound) from the process-wide generator.
Tensor uniform(Shape shape, double bound);

}  // namespace kael::nn::detail
