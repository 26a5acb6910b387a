// The fused LSTM cell's forward on raw F32 rows, which the LSTM layer (rnn.cpp) runs step by
// step without recording; its backward is the named rule lstm_cell_backward (tensor/backward.hpp).
#pragma once

#include <cstdint>

namespace kael::tensor_detail {

// lstm_cell_fused's arithmetic: h_next and c_next (B rows of H, each ld_out floats apart) from
// the gates (B, 4H) before the nonlinearities and c (B, H), all dense. Threaded over rows.
void lstm_cell_forward(float* h_next, float* c_next, std::int64_t ld_out, const float* gates, const float* c,
                       std::int64_t B, std::int64_t H);

}  // namespace kael::tensor_detail
