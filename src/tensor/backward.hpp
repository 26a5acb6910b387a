// The tensor library's backward rules, by name: each op's recorded backward calls one of these,
// and tests call them alone (tests/library_tensor_backward_test.cpp). Each takes the gradient g
// of the op's output and what the forward saved, and returns the gradients of the op's inputs
// in order (an undefined Tensor for an input that gets none). docs/tensor.md lists where each
// op's derivative lives.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "kael/tensor/conv.hpp"
#include "kael/tensor/ops.hpp"

namespace kael::tensor_detail {

// layer_norm over the last dim of an F32 contiguous x (rows, C), as functional.cpp's row path:
// {dx, dweight, dbias} through kernels::layer_norm_backward, from the forward's x, weight
// (undefined: none, and no dweight) and the rows' mean and rstd (rows, 1) it saved.
std::vector<Tensor> layer_norm_backward(const Tensor& g, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                        const Tensor& rstd);

// softmax and log_softmax over dim, from their output y: y (g - sum(g y)) and g - e^y sum(g)
// (log_softmax's F32 rows over the last dim in one pass per row on the kernel table).
Tensor softmax_backward(const Tensor& g, const Tensor& y, int dim);
Tensor log_softmax_backward(const Tensor& g, const Tensor& y, int dim);

// nll_loss's pick of one column per row of (N, C) at ids (N, I64, each in [0, C)): the (N, C)
// gradient of dtype dt, zero but g[i] (g of N elements) at (i, ids[i]), threaded over rows.
Tensor pick_columns_backward(const Tensor& g, const Tensor& ids, std::int64_t C, DType dt);

// cross_entropy's row form (mean reduction, no smoothing) from the saved contiguous logits
// (N, C) and class ids (N, I64): (softmax - one-hot) g / counted on counted rows, 0 on rows
// whose id is ignore_index; inv_counted = 1 / counted rows. F32 through
// kernels::cross_entropy_row.
Tensor cross_entropy_backward(const Tensor& g, const Tensor& logits, const Tensor& ids, std::int64_t ignore_index,
                              double inv_counted);

// scaled_dot_product_attention's kernel form (F32 causal self-attention with the default scale)
// as attention.cpp runs it, each batch element one sequence of one head: from g, the forward's
// q, k, v (all contiguous (G, L, E)), the probabilities probs (G, L, L) it saved and its dropout
// (dropout_p in [0, 1); the mask kernels::DropoutMask{p, seed, stream, first} draws, element
// index = probs index): {dq, dk, dv} (G, L, E) through kernels::causal_attention_backward.
std::vector<Tensor> scaled_dot_product_attention_backward(const Tensor& g, const Tensor& q, const Tensor& k,
                                                          const Tensor& v, const Tensor& probs, double dropout_p,
                                                          std::uint64_t seed, std::uint64_t stream = 0,
                                                          std::uint64_t first = 0);

// The same for q, k, v (B, H, L, E) that the kernels read where they lie: rows ld floats apart,
// head h at columns [h E, (h + 1) E) (attention.cpp's shared_row_stride), g in any layout, probs
// (B H, L, L) and the forward's dropout: {dq, dk, dv} as views with q's strides into one new
// buffer of (B, L, ld) rows side by side when ld >= 3 H E (the qkv tensor they were split
// from), else three, so that the split's backward reads them without a copy.
std::vector<Tensor> scaled_dot_product_attention_heads_backward(const Tensor& g, const Tensor& q, const Tensor& k,
                                                                const Tensor& v, const Tensor& probs, std::int64_t ld,
                                                                double dropout_p, std::uint64_t seed,
                                                                std::uint64_t stream, std::uint64_t first);

// matmul of a (..., M, K) and b (..., K, N), both at least 2-D: {g b^T, a^T g}, each summed
// back to its operand's broadcast shape; need_a / need_b false leaves that one undefined.
std::vector<Tensor> matmul_backward(const Tensor& g, const Tensor& a, const Tensor& b, bool need_a, bool need_b);

// gelu(x, approximate): g gelu'(x), the tanh form's F32 through kernels::gelu_backward, the rest by the scalar rules.
Tensor gelu_backward(const Tensor& g, const Tensor& x, const char* approximate);

// relu, from its output y: g where y > 0 or y is NaN, else 0 (torch's threshold_backward at 0).
Tensor relu_backward(const Tensor& g, const Tensor& y);

// dropout, from the BOOL mask `keep` its forward drew: g * (keep ? scale : 0), the scale rounded
// to g's dtype, a product so that a NaN g stays NaN where dropped (as torch's mul by its noise).
Tensor dropout_backward(const Tensor& g, const Tensor& keep, double scale);

// Views, joins, selection, pooling, convolution, recurrent cells and composed attention.

// select's and slice's views (views.cpp): g written into zeros of the input's shape where the
// view took it, as torch's select_backward and slice_backward (index in [0, size); start and
// end clamped to [0, size], step > 0). The other views' rules are views of g (reshape to the
// input's shape, the inverse permute, (un)squeeze the other way) or sum_to (expand).
Tensor select_backward(const Tensor& g, const Shape& input_shape, int dim, std::int64_t index);
Tensor slice_backward(const Tensor& g, const Shape& input_shape, int dim, std::int64_t start, std::int64_t end,
                      std::int64_t step);

// clone and reshape's copy: g itself.
Tensor identity_backward(const Tensor& g);

// to(dtype) and to(device): g taken back to the input's dtype or device.
Tensor to_backward(const Tensor& g, DType from);
Tensor to_backward(const Tensor& g, Device from);

// copy_(source): {undefined for the old self, whose every value was replaced; g summed to the
// source's shape, in its dtype}. fill_: undefined, the old values no longer count.
std::vector<Tensor> copy_backward(const Tensor& g, const Shape& source_shape, DType source_dtype);
Tensor fill_backward(const Tensor& g);

// as_strided_scatter(input, src, size, stride, offset) (shape_ops.cpp): {g with the view's
// elements zeroed, the view's elements of g summed to src's shape in src's dtype}. The view
// (size, stride, offset) is over g's elements laid out contiguously.
std::vector<Tensor> as_strided_scatter_backward(const Tensor& g, const Shape& size,
                                                const std::vector<std::int64_t>& stride, std::int64_t offset,
                                                const Shape& src_shape, DType src_dtype);

// cat along dim of inputs whose slices of the output start at starts (one per input, then the
// output's size along dim): each input's slice of g (join.cpp).
std::vector<Tensor> cat_backward(const Tensor& g, int dim, const std::vector<std::int64_t>& starts);

// index_select(a, dim, ids) from its contiguous I64 ids (1-D, each in range): zeros of a's
// shape with g's i-th slice along dim added at ids[i], repeated ids adding up (join.cpp).
Tensor index_select_backward(const Tensor& g, const Shape& input_shape, int dim, const Tensor& ids);

// gather on rows as select.cpp runs it: out (rows, k) = a (rows, n)[r, index[r, j]], index
// contiguous I64 (rows, k). Each element of g added back where it came from, summed in F64,
// returned (rows, n) in dtype.
Tensor gather_backward(const Tensor& g, const Tensor& index, std::int64_t n, DType dtype);

// Pooling of an input (N, C, H, W), F32 or F64, from g (N, C, Ho, Wo) (pool.cpp). max_pool2d
// from the forward's indices (I64, g's shape), each the flat position in its (H, W) plane of the
// element the window picked: g added there. avg_pool2d with the forward's options (stride 0:
// the kernel size; padding at most half the kernel): each output's g divided by its window's
// count (or divisor_override when > 0) and added to the window's inputs. adaptive_avg_pool2d:
// the same over torch's adaptive windows [floor(i H / Ho), ceil((i + 1) H / Ho)).
Tensor max_pool2d_backward(const Tensor& g, const Tensor& indices, const Shape& input_shape);
Tensor avg_pool2d_backward(const Tensor& g, const Shape& input_shape, Size2 kernel_size, Size2 stride, Size2 padding,
                           bool count_include_pad, std::int64_t divisor_override);
Tensor adaptive_avg_pool2d_backward(const Tensor& g, const Shape& input_shape);

// conv2d of an input (N, C, H, W) and a weight (O, C / groups, kH, kW), all F32 (conv.cpp):
// {dinput, dweight, dbias} from g (N, O, Ho, Wo), each undefined where output_mask says none is
// wanted. input is read for dweight only and weight for dinput only (either may be undefined
// when not read), so their shapes come separately.
std::vector<Tensor> conv2d_backward(const Tensor& g, const Tensor& input, const Tensor& weight, const Shape& input_shape,
                                    const Shape& weight_shape, Size2 stride, Size2 padding, Size2 dilation,
                                    std::int64_t groups, std::array<bool, 3> output_mask);

// The fused cells of kael/tensor/rnn.hpp (rnn_cells.cpp), F32 or F64, recomputing the gate
// activations. lstm_cell: from g of [h' | c'] (B, 2H), the gates (B, 4H) before the
// nonlinearities and the cell state c (B, H): {dgates, dc}. gru_cell: from g of h' (B, H), gi
// and gh (B, 3H) and h (B, H): {dgi, dgh, dh}.
std::vector<Tensor> lstm_cell_backward(const Tensor& g, const Tensor& gates, const Tensor& c);
std::vector<Tensor> gru_cell_backward(const Tensor& g, const Tensor& gi, const Tensor& gh, const Tensor& h);

// One LSTM layer's T > 0 steps as rnn.cpp records them, from g (T + 2, B, H) of [every step's
// h, h_n, c_n], W_hh (4H, H), every step's gates before the nonlinearities gates_all
// (T, B, 4H) and the states before each step hs and cs (T + 1, B, H): the cells' backwards in
// reverse, then {dgi_all (T, B, 4H), dh0, dc0, dW_hh over all steps in one product, db_hh
// (undefined without has_bias)}.
std::vector<Tensor> lstm_backward(const Tensor& g, const Tensor& w_hh, const Tensor& gates_all, const Tensor& hs,
                                  const Tensor& cs, bool has_bias);

// scaled_dot_product_attention's composed form without dropout (attention.cpp) from g
// (..., L, Ev), the forward's q (..., L, E), k (..., S, E), v (..., S, Ev) (batch dims
// broadcasting), the probabilities p (..., L, S) it recomputes and the scale: {dq, dk, dv}, each
// summed to its operand's shape, undefined where output_mask says none is wanted.
std::vector<Tensor> scaled_dot_product_attention_math_backward(const Tensor& g, const Tensor& q, const Tensor& k,
                                                               const Tensor& v, const Tensor& p, double scale,
                                                               std::array<bool, 3> output_mask);

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

// clamp(x, min, max), each bound given or not: g where min < x < max for the bounds given, else
// 0. A bound hit exactly gets 0, and NaN gets 0, as torch's clamp with number bounds.
Tensor clamp_backward(const Tensor& g, const Tensor& x, std::optional<double> min, std::optional<double> max);

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

// max(x, dim) and min(x, dim), from the
// indices they returned (keepdim as the forward's; dim in [-rank, rank)): each of g's elements
// at its chosen index along dim of a zero tensor of input_shape, as torch's
// value_selecting_reduction_backward.
Tensor value_selecting_reduction_backward(const Tensor& g, int dim, const Tensor& indices, const Shape& input_shape,
                                          bool keepdim);

// The whole-tensor max(x) or min(x), from x and the one-element value it returned: g shared
// evenly by the elements equal to value (the NaNs when value is NaN), as torch's
// evenly_distribute_backward.
Tensor evenly_distribute_backward(const Tensor& g, const Tensor& x, const Tensor& value);

// Linear layers (matmul.cpp).

// linear of x (..., in) with weight (out, in) (F32 or F64, the op's own node): from g (..., out),
// {dx = g W in x's shape, dweight = g^T x (out, in), dbias = g summed to (out)}, each left
// undefined where need_* is false. dweight is made in the weight's layout by a product that
// reads g transposed in place.
std::vector<Tensor> linear_backward(const Tensor& g, const Tensor& x, const Tensor& weight, bool need_x,
                                    bool need_weight, bool need_bias);

}  // namespace kael::tensor_detail
