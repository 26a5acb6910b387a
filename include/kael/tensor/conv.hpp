// Convolutions, as torch.nn.functional's: input (N, C, H, W) or unbatched (C, H, W), weight
// (O, C / groups, kH, kW), bias (O) or undefined; out (N, O, Ho, Wo) with
// Ho = (H + 2 padding - dilation (kH - 1) - 1) / stride + 1. F32, run as packed GEMMs over
// im2col columns on the kernel table (docs/tensor.md, "Convolution and pooling").
// ValueError for shapes and options, TypeError for dtypes.
#pragma once

#include <array>
#include <cstdint>

#include "kael/core/tensor.hpp"

namespace kael {

// (height, width) of a 2-D option: stride, padding, dilation, kernel size.
using Size2 = std::array<std::int64_t, 2>;

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(), Size2 stride = {1, 1},
              Size2 padding = {0, 0}, Size2 dilation = {1, 1}, std::int64_t groups = 1);
// input (N, C, L) or (C, L), weight (O, C / groups, k): conv2d over a height of 1.
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(), std::int64_t stride = 1,
              std::int64_t padding = 0, std::int64_t dilation = 1, std::int64_t groups = 1);

}  // namespace kael

namespace kael {

// Dropout of whole feature maps (torch's dropout2d / dropout1d): input (N, C, ...) or (C, ...);
// each channel of each sample is zeroed with probability p, the rest scaled by 1 / (1 - p),
// when training. The mask comes from the process-wide generator.
Tensor feature_dropout(const Tensor& input, double p, bool training = true, int batched_dims = 4);

}  // namespace kael
