// Batch and group normalization, as torch.nn.functional's, composed of the differentiable ops
// (so their gradients follow). input (N, C, ...): statistics per channel over the batch and
// the spatial dims (batch_norm), or per sample over groups of channels (group_norm); weight and
// bias (C) may be undefined. ValueError for shapes.
#pragma once

#include <cstdint>

#include "kael/core/tensor.hpp"

namespace kael {

// training: normalizes by the batch's mean and biased variance, and (when defined) moves
// running_mean / running_var towards the batch's mean and unbiased variance by `momentum`,
// in place. Otherwise normalizes by the running statistics.
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(), bool training = false,
                  double momentum = 0.1, double eps = 1e-5);
// Channels split into num_groups consecutive groups, each normalized per sample.
Tensor group_norm(const Tensor& input, std::int64_t num_groups, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

}  // namespace kael
