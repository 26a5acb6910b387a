// The fused cells of the recurrent layers: one pass over the gates per time step, forward and
// backward, in torch's gate order. The input and hidden products (x W_ih^T + b_ih and
// h W_hh^T + b_hh) are linear() calls before the cell. F32 or F64; ValueError for shapes.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "kael/core/tensor.hpp"

namespace kael {

// gates (B, 4H): the summed pre-activations of the input, forget, cell and output gates;
// c (B, H). Returns (h', c'): c' = sigmoid(f) c + sigmoid(i) tanh(g), h' = sigmoid(o) tanh(c').
std::pair<Tensor, Tensor> lstm_cell_fused(const Tensor& gates, const Tensor& c);
// gi (B, 3H) = x W_ih^T + b_ih and gh (B, 3H) = h W_hh^T + b_hh in the reset, update, new order;
// h (B, H). r = sigmoid(gi_r + gh_r), z = sigmoid(gi_z + gh_z), n = tanh(gi_n + r gh_n);
// returns h' = (1 - z) n + z h.
Tensor gru_cell_fused(const Tensor& gi, const Tensor& gh, const Tensor& h);

// torch.lstm_cell, gru_cell, rnn_tanh_cell, rnn_relu_cell: one step of one layer from input
// (B, in) or (in) and the hidden state (B, H); the biases may be undefined.
std::pair<Tensor, Tensor> lstm_cell(const Tensor& input, const Tensor& hx, const Tensor& cx, const Tensor& w_ih,
                                    const Tensor& w_hh, const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());
Tensor gru_cell(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh,
                const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());
Tensor rnn_tanh_cell(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh,
                     const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());
Tensor rnn_relu_cell(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh,
                     const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());

// The whole sequence through num_layers layers, as torch.nn.RNN / LSTM / GRU compute it.
// mode "RNN_TANH", "RNN_RELU", "LSTM" or "GRU". input (T, B, in), (B, T, in) with batch_first,
// or unbatched (T, in); hx (and cx for LSTM) (num_layers, B, H) or (num_layers, H) unbatched,
// undefined for zeros. params: per layer w_ih (G H, in or H), w_hh (G H, H) and, with
// has_biases, b_ih and b_hh (G H), G being 4 (LSTM), 3 (GRU) or 1. dropout (when training) is
// applied to each layer's output but the last. Returns the last layer's outputs (T, B, H) (or
// batch first) and the last step's h (and c) of every layer.
struct RnnResult {
  Tensor output, h_n, c_n;  // c_n only for LSTM
};
RnnResult rnn(std::string_view mode, const Tensor& input, const Tensor& hx, const Tensor& cx,
              const std::vector<Tensor>& params, bool has_biases, std::int64_t num_layers, double dropout = 0.0,
              bool training = false, bool batch_first = false);

}  // namespace kael
