// A linear layer y = x @ W + b (W (K, N), input-major as GPT-2's Conv1D stores it) forward and
// backward for training (the deleted hand-written training step's; only its tests call it now), on the threaded GEMMs at the precision
// the model trains at: F32 (gemm.hpp) or, with bf16, BF16 operands with F32 sums (gemm_bf16.hpp;
// the caller has checked gemm_bf16_available). The weights change at every optimizer step, so
// each product converts its weight on the way in (an O(K N) pass against the O(M K N) product).
// The inference form on a plain weight is linear.hpp's.
#pragma once

#include <cstdint>

namespace kael::kernels {

// out (M, N) = inp (M, K) @ w (K, N) + bias (N; may be null). scratch holds K * N floats (the
// packed w, at F32).
void linear_forward(float* out, float* scratch, const float* inp, const float* w, const float* bias, std::int64_t M,
                    std::int64_t K, std::int64_t N, bool bf16);

// The backward of linear_forward, both products in one call: dw (K, N) += inp^T @ dout,
// dbias (N; may be null) += the column sums of dout, and dinp (M, K) = dout @ w^T, for inp
// (M, K) and dout (M, N); dinp must not overlap dout. At bf16, dout is converted once for both
// products (and dbias summed from that same read).
void linear_backward(float* dinp, float* dw, float* dbias, const float* dout, const float* inp, const float* w,
                     std::int64_t M, std::int64_t K, std::int64_t N, bool bf16);

}  // namespace kael::kernels
