// The one place that decides how the tensor library multiplies F32 matrices: at the process's
// float32 matmul precision (kael/tensor/precision.hpp). matmul and linear (src/tensor/matmul.cpp)
// call f32_product for every product, forward and backward; nn's packed inference weights ask
// bf16_products() so that they step aside when the products are BF16.
#pragma once

#include <cstdint>

namespace kael::tensor_detail {

// Whether F32 products run on BF16 operands now: the precision is "medium" and the active
// kernel set has a BF16 product (kernels::gemm_bf16_available()).
bool bf16_products();

// c (M, N; ldc) = op(a) @ op(b) (+ bias (N), not rounded, added to each complete sum), with
// kernels::gemm's arguments: kernels::gemm_bf16 where bf16_products(), else kernels::gemm. One
// read of the setting per call, so a product never mixes the two.
void f32_product(float* c, std::int64_t ldc, const float* a, std::int64_t lda, bool trans_a, const float* b,
                 std::int64_t ldb, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
                 const float* bias = nullptr);

}  // namespace kael::tensor_detail
