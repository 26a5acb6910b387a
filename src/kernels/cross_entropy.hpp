// Softmax cross-entropy: of one row of logits, forward and backward in one pass (the tensor
// library's cross_entropy calls it per row, threading over its rows), and GPT-2's output head
// fused with it (the deleted hand-written training step's; only its tests call it now), which
// calls it per row of each chunk of logits.
#pragma once

#include <cstdint>

namespace kael::kernels {

// The loss -log softmax(logits)[target] of one row (V), from the row's largest logit and the
// table's softmax: margin = max - logits[target], then loss = margin - log(max p) (the largest
// probability, 1 / sum, is never tiny). With dlogits not null it also receives
// (softmax - one-hot(target)) * dscale; dlogits may equal logits. target < 0: an ignored row,
// loss 0 and dlogits 0. The caller has checked target < V.
float cross_entropy_row(float* dlogits, const float* logits, std::int64_t target, float dscale, std::int64_t V);

// The output head fused with softmax cross-entropy, over rows in chunks of R so no (M, V)
// tensor exists: per chunk, logits (R, V) = x @ w^T for x (M, C) and w (V, C); p =
// softmax(logits); the row's loss is -log p[target] (cross_entropy_row). With dx non-null (the
// backward), dlogits = (p - onehot) * dscale, dx (M, C) = dlogits @ w (overwritten) and dw
// (V, C) += dlogits^T @ x. Rows whose target is negative count nothing and get dx = 0. losses
// (M) receives each row's loss (0 for those). bf16: the three products on BF16 operands
// (gemm_bf16.hpp; the caller has checked gemm_bf16_available), else in F32. scratch holds
// head_scratch_floats(M, C, V) floats: the weight converted for the products once per call,
// for every chunk (w^T in F32 panels, V C; or at bf16 w^T and w's vocabulary blocks as
// gemm_bf16 operands), and one chunk's logits (R V). The plain reference is
// reference/cross_entropy.hpp's.
void head_cross_entropy(float* losses, float* dx, float* dw, float* scratch, const float* x, const float* w,
                        const std::int32_t* targets, float dscale, std::int64_t M, std::int64_t C, std::int64_t V,
                        bool bf16);
std::int64_t head_scratch_floats(std::int64_t M, std::int64_t C, std::int64_t V);

namespace ref {
// In double, rounded once.
float cross_entropy_row(float* dlogits, const float* logits, std::int64_t target, float dscale, std::int64_t V);
}  // namespace ref

}  // namespace kael::kernels
