// The fused LSTM cell's backward (rnn_cells.cpp), for rnn.cpp's whole-layer LSTM node, which
// runs the steps' backwards itself.
#pragma once

#include <cstdint>
#include <vector>

#include "kael/core/tensor.hpp"

namespace kael::tensor_detail {

// From the step's dense gates (B, 4H) (before the nonlinearities), its dense cell state c (B, H)
// and the dense gradient of [h' | c'] (B, 2H): the gradients of the gates and of c.
std::vector<Tensor> lstm_cell_backward(const Tensor& gates, const Tensor& c, const Tensor& grad);

// The fused LSTM cell's F32 forward on raw rows, lstm_cell_fused's arithmetic: h_next and c_next
// (B rows of H, each ld_out floats apart) from the gates (B, 4H) before the nonlinearities and
// c (B, H), all dense. Threaded over rows.
void lstm_cell_forward(float* h_next, float* c_next, std::int64_t ld_out, const float* gates, const float* c,
                       std::int64_t B, std::int64_t H);

}  // namespace kael::tensor_detail
