// Gradient clipping as torch.nn.utils.clip_grad_norm_.
#pragma once

#include <vector>

#include "kael/core/tensor.hpp"

namespace kael::optim {

// The norm of all the gradients of `params` taken together, as if concatenated (norm_type p
// > 0, or infinity for the largest magnitude); then every gradient is multiplied in place by
// min(1, max_norm / (total + 1e-6)). Parameters without a gradient are ignored (0 when none
// has one). ValueError for a norm_type <= 0 or, with error_if_nonfinite,
// a total that is NaN or infinite (the gradients are then left as they are).
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

}  // namespace kael::optim
