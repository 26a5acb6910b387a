// The fused LSTM cell's backward (rnn_cells.cpp), for rnn.cpp's whole-layer LSTM node, which
// runs the steps' backwards itself.
#pragma once

#include <vector>

#include "kael/core/tensor.hpp"

namespace kael::tensor_detail {

// From the step's dense gates (B, 4H) (before the nonlinearities), its dense cell state c (B, H)
// and the dense gradient of [h' | c'] (B, 2H): the gradients of the gates and of c.
std::vector<Tensor> lstm_cell_backward(const Tensor& gates, const Tensor& c, const Tensor& grad);

}  // namespace kael::tensor_detail
