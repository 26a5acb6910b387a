// The forward and backward kernels of GPT-2's operations, threaded on kael's pool. Plain
// functions on raw row-major pointers: outputs first, then inputs, then sizes. M = B * T rows.
// A backward kernel's "+=" outputs accumulate (parameter gradients, the residual stream's
// gradient); the others are overwritten. Each has a plain reference in reference.hpp, and
// every reduction runs in a fixed order, so results do not depend on the thread count.
#pragma once

#include <cstdint>

#include "kael/train/gpt2_train.hpp"
#include "train/model/random.hpp"

namespace kael::train {

// x (n) *= mask.factor(i): dropout in place, forward or backward (the same mask).
void dropout_apply(float* x, const DropoutMask& mask, std::int64_t n);
// out (n) = x (n) + y (n), one pass over the three (out may be x).
void add(float* out, const float* x, const float* y, std::int64_t n);

// Causal self-attention of B sequences, NH heads of hd = C / NH: qkv (M, 3C) holds q, k and v
// side by side, head h in columns [h hd, (h + 1) hd) of each. probs (B, NH, T, T) receives the
// softmax of q k^T / sqrt(hd) (zero above the diagonal), kept for the backward; dropout (its
// element index is the probs index) applies to them before out (M, C) = probs @ v.
void attention_forward(float* out, float* probs, const float* qkv, const DropoutMask& dropout, std::int64_t B,
                       std::int64_t T, std::int64_t NH, std::int64_t hd);
// dqkv (M, 3C) from dout (M, C).
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* probs,
                        const DropoutMask& dropout, std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t hd);

// x (B*T, C) = wte[inp] + wpe[t] (the caller has checked the ids).
void embedding_forward(float* x, const std::int32_t* inp, const float* wte, const float* wpe, std::int64_t B,
                       std::int64_t T, std::int64_t C);
// dwte (V, C) +=, dwpe (T, C) += from dx (B*T, C); either may be null (left out).
void embedding_backward(float* dwte, float* dwpe, const float* dx, const std::int32_t* inp, std::int64_t B,
                        std::int64_t T, std::int64_t C);

// The output head fused with softmax cross-entropy, over rows in chunks of R so no (M, V)
// tensor exists: per chunk, logits (R, V) = x @ w^T for w (V, C); p = softmax(logits); the
// row's loss is -log p[target]. With dx non-null (the backward), dlogits = (p - onehot) *
// dscale, dx (M, C) = dlogits @ w (overwritten) and dw (V, C) += dlogits^T @ x. Rows whose
// target is negative count nothing and get dx = 0. losses (M) receives each row's loss (0 for
// those). scratch holds head_scratch_floats(M, C, V) floats: the weight converted for the
// kernels once per call, for every chunk (w^T in F32 panels, V C; or at bf16 w^T and w's
// vocabulary blocks as gemm_bf16 operands), and one chunk's logits (R V).
void head_cross_entropy(float* losses, float* dx, float* dw, float* scratch, const float* x, const float* w,
                        const std::int32_t* targets, float dscale, std::int64_t M, std::int64_t C, std::int64_t V,
                        Precision precision);
std::int64_t head_scratch_floats(std::int64_t M, std::int64_t C, std::int64_t V);

}  // namespace kael::train
