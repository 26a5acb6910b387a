// Softmax cross-entropy of one row of logits, forward and backward in one pass: the training
// step's fused head and the tensor library's cross_entropy call it per row, each threading over
// its rows.
#pragma once

#include <cstdint>

namespace kael::kernels {

// The loss -log softmax(logits)[target] of one row (V), from the row's largest logit and the
// table's softmax: margin = max - logits[target], then loss = margin - log(max p) (the largest
// probability, 1 / sum, is never tiny). With dlogits not null it also receives
// (softmax - one-hot(target)) * dscale; dlogits may equal logits. target < 0: an ignored row,
// loss 0 and dlogits 0. The caller has checked target < V.
float cross_entropy_row(float* dlogits, const float* logits, std::int64_t target, float dscale, std::int64_t V);

namespace ref {
// In double, rounded once.
float cross_entropy_row(float* dlogits, const float* logits, std::int64_t target, float dscale, std::int64_t V);
}  // namespace ref

}  // namespace kael::kernels
