// Pooling, as torch.nn.functional's: input (N, C, H, W) or (C, H, W), F32 or F64. Output sizes
// are torch's: (H + 2 padding - dilation (k - 1) - 1) / stride + 1, rounded up with ceil_mode
// (a window that would start in the right padding is dropped). stride defaults to the kernel
// size when empty ({0, 0}). ValueError for shapes and options.
#pragma once

#include <cstdint>
#include <utility>

#include "kael/core/tensor.hpp"
#include "kael/tensor/conv.hpp"

namespace kael {

// The largest value of each window (padding counts as -inf); the gradient goes to the first
// largest of each window. max_pool2d_with_indices also gives the flat H * W index of each (I64).
Tensor max_pool2d(const Tensor& input, Size2 kernel_size, Size2 stride = {0, 0}, Size2 padding = {0, 0},
                  Size2 dilation = {1, 1}, bool ceil_mode = false);
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, Size2 kernel_size, Size2 stride = {0, 0},
                                                  Size2 padding = {0, 0}, Size2 dilation = {1, 1},
                                                  bool ceil_mode = false);
// input (N, C, L) or (C, L): max_pool2d over a height of 1.
Tensor max_pool1d(const Tensor& input, std::int64_t kernel_size, std::int64_t stride = 0, std::int64_t padding = 0,
                  std::int64_t dilation = 1, bool ceil_mode = false);
// The mean of each window: over the window's elements including padding (count_include_pad),
// or over those inside the input; divisor_override > 0 replaces either count.
Tensor avg_pool2d(const Tensor& input, Size2 kernel_size, Size2 stride = {0, 0}, Size2 padding = {0, 0},
                  bool ceil_mode = false, bool count_include_pad = true, std::int64_t divisor_override = 0);
// The mean over windows that tile the input into output_size (Ho, Wo): window i spans
// [floor(i H / Ho), ceil((i + 1) H / Ho)).
Tensor adaptive_avg_pool2d(const Tensor& input, Size2 output_size);

}  // namespace kael
