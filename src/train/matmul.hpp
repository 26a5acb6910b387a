// The three matrix products of a linear layer y = x @ W + b (W (K, N), input-major as GPT-2's
// Conv1D stores it), on the kernel layer's GEMM (kernels/linear.hpp). The backward products
// need a transposed operand, which the kernels do not take: it is transposed into scratch
// first (threaded), an O(size) pass against the O(M K N) product.
#pragma once

#include <cstdint>

namespace kael::train {

// out (M, N) = inp (M, K) @ w (K, N) + bias (N; may be null).
void matmul_forward(float* out, const float* inp, const float* w, const float* bias, std::int64_t M, std::int64_t K,
                    std::int64_t N);

// dinp (M, K) = dout (M, N) @ w^T. scratch holds K * N floats (w^T).
void matmul_backward_input(float* dinp, float* scratch, const float* dout, const float* w, std::int64_t M,
                           std::int64_t K, std::int64_t N);

// dw (K, N) += inp^T @ dout and dbias (N; may be null) += the column sums of dout, for
// inp (M, K) and dout (M, N). scratch holds matmul_weight_scratch_floats(M, N) floats.
void matmul_backward_weight(float* dw, float* dbias, float* scratch, const float* inp, const float* dout,
                            std::int64_t M, std::int64_t K, std::int64_t N);
std::int64_t matmul_weight_scratch_floats(std::int64_t M, std::int64_t N);

// out (cols, rows) = inp (rows, cols)^T, threaded.
void transpose(float* out, const float* inp, std::int64_t rows, std::int64_t cols);

}  // namespace kael::train
