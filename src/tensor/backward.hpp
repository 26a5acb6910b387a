// The tensor library's backward rules, by name: each op's recorded backward calls one of these,
// and tests call them alone (tests/library_tensor_backward_test.cpp). Each takes the gradient g
// of the op's output and what the forward saved, and returns the gradients of the op's inputs
// in order (an undefined Tensor for an input that gets none). docs/tensor.md lists where each
// op's derivative lives.
#pragma once

#include <vector>

#include "kael/tensor/ops.hpp"

namespace kael::tensor_detail {

// layer_norm over the last dim of an F32 contiguous x (rows, C), as functional.cpp's row path:
// {dx, dweight, dbias} through kernels::layer_norm_backward, from the forward's x, weight
// (undefined: none, and no dweight) and the rows' mean and rstd (rows, 1) it saved.
std::vector<Tensor> layer_norm_backward(const Tensor& g, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                        const Tensor& rstd);

// gelu(x, approximate): g gelu'(x), the tanh form's F32 through kernels::gelu_backward (the
// engine's and the training step's), the rest by the scalar rules.
Tensor gelu_backward(const Tensor& g, const Tensor& x, const char* approximate);

}  // namespace kael::tensor_detail
