// Causal self-attention for training: the forward keeps the probabilities and applies a
// dropout mask to them, the backward takes both. The tensor library's
// scaled_dot_product_attention (its F32 causal form, so nn::GPT's training and `kael train`)
// calls these; the engine's inference forms, which keep nothing, are in attention.hpp.
//
// Layout: B sequences of T positions, NH heads of hd. q, k and v hold row (b, t) at
// (b T + t) ld, head h in columns [h hd, (h + 1) hd) of it: a fused projection's qkv rows
// (ld = 3 NH hd, k = q + C, v = q + 2 C; the kernel tests use it) or three separate dense
// (B, T, hd) tensors (NH = 1, ld = hd), as scaled_dot_product_attention passes them. The output and its gradient are (B T, NH hd). probs (B, NH, T, T): the softmax of
// q k^T / sqrt(hd) per head, zero above the diagonal; the dropout mask's element index is the
// probs index. Each has a plain reference in reference/attention_train.hpp. Threaded over
// (b, h) pairs, each pair's sums in a fixed order: the same bits on any number of threads.
#pragma once

#include <cstdint>

#include "kernels/random.hpp"

namespace kael::kernels {

// probs = softmax(q k^T / sqrt(hd)) with the causal mask; out = dropout(probs) @ v.
void causal_attention_forward(float* out, float* probs, const float* q, const float* k, const float* v,
                              std::int64_t ld, const DropoutMask& dropout, std::int64_t B, std::int64_t T,
                              std::int64_t NH, std::int64_t hd);

// dq, dk, dv (overwritten; rows ld apart, as q, k, v) from dout (B T, NH hd), the forward's
// inputs, its probs and the same mask. dq, dk and dv may share one buffer's rows (qkv) but not
// overlap q, k, v or dout.
void causal_attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                               const float* v, std::int64_t ld, const float* probs, const DropoutMask& dropout,
                               std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t hd);

}  // namespace kael::kernels
