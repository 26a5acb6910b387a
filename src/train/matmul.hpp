// The three matrix products of a linear layer y = x @ W + b (W (K, N), input-major as GPT-2's
// Conv1D stores it), on the kernel layer's threaded GEMM (kernels/gemm.hpp). The weights
// change at every optimizer step, so each product packs its weight into the kernels' panel
// layout on the way in (an O(K N) pass against the O(M K N) product).
#pragma once

#include <cstdint>

namespace kael::train {

// out (M, N) = inp (M, K) @ w (K, N) + bias (N; may be null). scratch holds K * N floats (the
// packed w).
void matmul_forward(float* out, float* scratch, const float* inp, const float* w, const float* bias, std::int64_t M,
                    std::int64_t K, std::int64_t N);

// dinp (M, K) = dout (M, N) @ w^T.
void matmul_backward_input(float* dinp, const float* dout, const float* w, std::int64_t M, std::int64_t K,
                           std::int64_t N);

// dw (K, N) += inp^T @ dout and dbias (N; may be null) += the column sums of dout, for
// inp (M, K) and dout (M, N).
void matmul_backward_weight(float* dw, float* dbias, const float* inp, const float* dout, std::int64_t M,
                            std::int64_t K, std::int64_t N);

}  // namespace kael::train
