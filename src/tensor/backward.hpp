// The tensor library's backward rules, by name: each op's recorded backward calls one of these,
// and tests call them alone (tests/library_tensor_backward_test.cpp). Each takes the gradient g
// of the op's output and what the forward saved, and returns the gradients of the op's inputs
// in order (an undefined Tensor for an input that gets none). docs/tensor.md lists where each
// op's derivative lives.
#pragma once

#include <cstdint>
#include <vector>

#include "kael/tensor/ops.hpp"

namespace kael::tensor_detail {

// layer_norm over the last dim of an F32 contiguous x (rows, C), as functional.cpp's row path:
// {dx, dweight, dbias} through kernels::layer_norm_backward, from the forward's x, weight
// (undefined: none, and no dweight) and the rows' mean and rstd (rows, 1) it saved.
std::vector<Tensor> layer_norm_backward(const Tensor& g, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                        const Tensor& rstd);

// softmax and log_softmax over dim, from their output y: y (g - sum(g y)) and g - e^y sum(g).
Tensor softmax_backward(const Tensor& g, const Tensor& y, int dim);
Tensor log_softmax_backward(const Tensor& g, const Tensor& y, int dim);

// cross_entropy's row form (mean reduction, no smoothing) from the saved contiguous logits
// (N, C) and class ids (N, I64): (softmax - one-hot) g / counted on counted rows, 0 on rows
// whose id is ignore_index; inv_counted = 1 / counted rows. F32 through
// kernels::cross_entropy_row.
Tensor cross_entropy_backward(const Tensor& g, const Tensor& logits, const Tensor& ids, std::int64_t ignore_index,
                              double inv_counted);

// scaled_dot_product_attention's kernel form (F32 causal self-attention with the default scale)
// as attention.cpp runs it, each batch element one sequence of one head: from g, the forward's
// q, k, v (all contiguous (G, L, E)), the probabilities probs (G, L, L) it saved and its dropout
// (dropout_p in [0, 1); the mask kernels::DropoutMask{p, seed} draws, element index = probs
// index): {dq, dk, dv} (G, L, E) through kernels::causal_attention_backward.
std::vector<Tensor> scaled_dot_product_attention_backward(const Tensor& g, const Tensor& q, const Tensor& k,
                                                          const Tensor& v, const Tensor& probs, double dropout_p,
                                                          std::uint64_t seed);

// matmul of a (..., M, K) and b (..., K, N), both at least 2-D: {g b^T, a^T g}, each summed
// back to its operand's broadcast shape; need_a / need_b false leaves that one undefined.
std::vector<Tensor> matmul_backward(const Tensor& g, const Tensor& a, const Tensor& b, bool need_a, bool need_b);

// gelu(x, approximate): g gelu'(x), the tanh form's F32 through kernels::gelu_backward (the
// engine's and the training step's), the rest by the scalar rules.
Tensor gelu_backward(const Tensor& g, const Tensor& x, const char* approximate);

// relu, from its output y: g where y > 0 or y is NaN, else 0 (torch's threshold_backward at 0).
Tensor relu_backward(const Tensor& g, const Tensor& y);

// dropout, from the BOOL mask `keep` its forward drew: g * (keep ? scale : 0), the scale rounded
// to g's dtype, a product so that a NaN g stays NaN where dropped (as torch's mul by its noise).
Tensor dropout_backward(const Tensor& g, const Tensor& keep, double scale);

// linear of x (..., in) with weight (out, in) (F32 or F64, the op's own node): from g (..., out),
// {dx = g W in x's shape, dweight = g^T x (out, in), dbias = g summed to (out)}, each left
// undefined where need_* is false. dweight is made in the weight's layout by a product that
// reads g transposed in place.
std::vector<Tensor> linear_backward(const Tensor& g, const Tensor& x, const Tensor& weight, bool need_x,
                                    bool need_weight, bool need_bias);

}  // namespace kael::tensor_detail
