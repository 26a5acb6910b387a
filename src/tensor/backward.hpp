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

// Elementwise ops and reductions (elementwise.cpp, reduce.cpp).
// Tested alone in tests/library_tensor_backward_elementwise_test.cpp.
// A binary op's gradient for an operand is summed back to that operand's (broadcast) shape;
// need_a / need_b false leaves that one undefined, and an operand the other's gradient does
// not use may then be undefined (what the forward saved).

// add(a, b, alpha) (and sub, alpha negated): {g, alpha g}, g scaled only where alpha != 1.
std::vector<Tensor> add_backward(const Tensor& g, const Shape& a_shape, const Shape& b_shape, double alpha);

// mul(a, b): {g b, g a}; b is read only for da and a only for db.
std::vector<Tensor> mul_backward(const Tensor& g, const Tensor& a, const Tensor& b, const Shape& a_shape,
                                 const Shape& b_shape, bool need_a, bool need_b);

// div(a, b): {g / b, -(g a) / (b b)}; a is read only for db.
std::vector<Tensor> div_backward(const Tensor& g, const Tensor& a, const Tensor& b, const Shape& a_shape, bool need_a,
                                 bool need_b);

// pow(a, exponent) with a scalar exponent e: g e a^(e-1), or zeros like a when e is 0.
Tensor pow_backward(const Tensor& g, const Tensor& a, double exponent);
// pow(a, exponent) with a tensor exponent, from the forward's output y:
// {g exponent a^(exponent-1), g y log(a)}.
std::vector<Tensor> pow_backward(const Tensor& g, const Tensor& a, const Tensor& exponent, const Tensor& y,
                                 bool need_a, bool need_exponent);

// maximum(a, b) and minimum(a, b): g to the operand that won, halved on each at a tie (as torch).
std::vector<Tensor> maximum_backward(const Tensor& g, const Tensor& a, const Tensor& b);
std::vector<Tensor> minimum_backward(const Tensor& g, const Tensor& a, const Tensor& b);

// neg: -g. abs: g sign(x), 0 at x == 0.
Tensor neg_backward(const Tensor& g);
Tensor abs_backward(const Tensor& g, const Tensor& x);

// The floating unary functions, from the input x and output y the forward saved (each reads
// the one its derivative needs): exp g y, log g / x, sqrt g / (2 y), rsqrt -g y^3 / 2,
// tanh g (1 - y^2), sin g cos(x), cos -g sin(x), sigmoid g y (1 - y).
Tensor exp_backward(const Tensor& g, const Tensor& x, const Tensor& y);
Tensor log_backward(const Tensor& g, const Tensor& x, const Tensor& y);
Tensor sqrt_backward(const Tensor& g, const Tensor& x, const Tensor& y);
Tensor rsqrt_backward(const Tensor& g, const Tensor& x, const Tensor& y);
Tensor tanh_backward(const Tensor& g, const Tensor& x, const Tensor& y);
Tensor sin_backward(const Tensor& g, const Tensor& x, const Tensor& y);
Tensor cos_backward(const Tensor& g, const Tensor& x, const Tensor& y);
Tensor sigmoid_backward(const Tensor& g, const Tensor& x, const Tensor& y);

// where(condition, a, b): {g where condition, g elsewhere}.
std::vector<Tensor> where_backward(const Tensor& g, const Tensor& condition, const Shape& a_shape,
                                   const Shape& b_shape);

// clamp(x, min, max) with its bounds as doubles (an absent one infinite): g where
// min <= x <= max (a bound hit exactly passes g), else 0.
Tensor clamp_backward(const Tensor& g, const Tensor& x, double min, double max);

// floor_divide: no derivative (as torch's): always ValueError.
std::vector<Tensor> floor_divide_backward(const Tensor& g);

// remainder(a, b): {g, -g floor_divide(a, b)}.
std::vector<Tensor> remainder_backward(const Tensor& g, const Tensor& a, const Tensor& b);

// sum of an input of input_shape over the dims that kept_shape (input_shape with the reduced
// dims 1) marks: g broadcast back to input_shape, a new contiguous tensor. mean and var are
// composed of sum, mul, sub and div.
Tensor sum_backward(const Tensor& g, const Shape& input_shape, const Shape& kept_shape);

// std's last step, sqrt of the variance, from its output s: g / (2 s) and 0 where s is 0 (torch's
// choice, not inf * 0); the gradient of the variance, which differentiates through var's ops.
Tensor std_backward(const Tensor& g, const Tensor& s);

// max(x, dim) and min(x, dim) (and the whole-tensor max/min, on the flattened x), from the
// indices they returned (keepdim as the forward's; dim in [-rank, rank)): each of g's elements
// at its chosen index along dim of a zero tensor of input_shape, as torch's
// value_selecting_reduction_backward (torch's whole-tensor max splits a tie evenly instead).
Tensor value_selecting_reduction_backward(const Tensor& g, int dim, const Tensor& indices, const Shape& input_shape,
                                          bool keepdim);

}  // namespace kael::tensor_detail
