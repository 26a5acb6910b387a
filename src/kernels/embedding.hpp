// GPT-2's input embedding: token rows plus position rows, forward and backward. The engine
// embeds one sequence from a position on; the batched forward and backward (B sequences from
// position 0, the gradient summed back into both tables) were the deleted hand-written
// training step's, and only their tests call them now.
#pragma once

#include <cstdint>

namespace kael::kernels {

// out (T, C) = wte[tokens[t]] + wpe[pos0 + t]. wte (vocab, C) and wpe (n_positions, C); the
// caller has checked every id against the vocabulary and pos0 + T against n_positions.
void embedding(float* out, const std::int32_t* tokens, const float* wte, const float* wpe, std::int64_t T,
               std::int64_t C, std::int64_t pos0);

// out (B*T, C): embedding() of each of the B sequences of tokens (B*T) from position 0, the
// sequences split over the pool's threads.
void embedding_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe, std::int64_t B,
                       std::int64_t T, std::int64_t C);
// dwte (vocab, C) += and dwpe (T, C) += the rows of dout (B*T, C) that used them; either may
// be null (left out). The columns are split over the threads and each column sums its rows in
// order, so the result does not depend on the thread count.
void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens, std::int64_t B,
                        std::int64_t T, std::int64_t C);

namespace ref {
void embedding(float* out, const std::int32_t* tokens, const float* wte, const float* wpe, std::int64_t T,
               std::int64_t C, std::int64_t pos0);
}  // namespace ref

}  // namespace kael::kernels
