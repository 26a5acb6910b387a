// The forward and backward kernels of GPT-2's operations that the training step alone uses,
// threaded on kael's pool (its attention and output head are the kernels' own:
// kernels/attention_train.hpp, kernels/cross_entropy.hpp). Plain functions on raw row-major
// pointers: outputs first, then inputs, then sizes. M = B * T rows.
// A backward kernel's "+=" outputs accumulate (parameter gradients, the residual stream's
// gradient); the others are overwritten. Each has a plain reference in reference.hpp, and
// every reduction runs in a fixed order, so results do not depend on the thread count.
#pragma once

#include <cstdint>

#include "train/model/random.hpp"

namespace kael::train {

// x (n) *= mask.factor(i): dropout in place, forward or backward (the same mask).
void dropout_apply(float* x, const DropoutMask& mask, std::int64_t n);
// out (n) = x (n) + y (n), one pass over the three (out may be x).
void add(float* out, const float* x, const float* y, std::int64_t n);

// x (B*T, C) = wte[inp] + wpe[t] (the caller has checked the ids).
void embedding_forward(float* x, const std::int32_t* inp, const float* wte, const float* wpe, std::int64_t B,
                       std::int64_t T, std::int64_t C);
// dwte (V, C) +=, dwpe (T, C) += from dx (B*T, C); either may be null (left out).
void embedding_backward(float* dwte, float* dwpe, const float* dx, const std::int32_t* inp, std::int64_t B,
                        std::int64_t T, std::int64_t C);

}  // namespace kael::train
