// The three matrix products of a linear layer y = x @ W + b (W (K, N), input-major as GPT-2's
// Conv1D stores it), on the kernel layer's threaded GEMM (kernels/gemm.hpp). The weights
// change at every optimizer step, so each product packs its weight into the kernels' panel
// layout on the way in (an O(K N) pass against the O(M K N) product).
#pragma once

#include <cstdint>

#include "kernels/aligned_vector.hpp"

namespace kael::train {

// out (M, N) = inp (M, K) @ w (K, N) + bias (N; may be null). scratch holds K * N floats (the
// packed w).
void matmul_forward(float* out, float* scratch, const float* inp, const float* w, const float* bias, std::int64_t M,
                    std::int64_t K, std::int64_t N);

// At --precision bf16, a layer's dout converted to BF16 as op(a) of dinp = dout @ w^T by the
// same read that converts it for dw (matmul_backward_weight fills it, matmul_backward_input
// reads it), so the F32 gradient is read once for both. Unused in F32.
struct ConvertedGradient {
  kernels::ScratchVector<std::uint16_t> rows;
  const float* source = nullptr;  // the dout it holds, with its sizes
  std::int64_t M = 0, N = 0;
};

// dinp (M, K) = dout (M, N) @ w^T. With `converted` holding this dout (filled by the
// matmul_backward_weight call just before), its BF16 rows are used instead of converting dout
// again, and `converted` is emptied: each fill serves one call.
void matmul_backward_input(float* dinp, const float* dout, const float* w, std::int64_t M, std::int64_t K,
                           std::int64_t N, ConvertedGradient* converted = nullptr);

// dw (K, N) += inp^T @ dout and dbias (N; may be null) += the column sums of dout, for
// inp (M, K) and dout (M, N). At --precision bf16, `converted` (where given) is filled for
// matmul_backward_input of the same dout.
void matmul_backward_weight(float* dw, float* dbias, const float* inp, const float* dout, std::int64_t M,
                            std::int64_t K, std::int64_t N, ConvertedGradient* converted = nullptr);

}  // namespace kael::train
