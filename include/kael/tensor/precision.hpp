// torch.set_float32_matmul_precision: how the tensor library computes the F32 matrix products
// of matmul and linear (forward and backward). One process-wide setting, read atomically by
// every product, so threads may change it while others compute (each product takes the value
// it read when it started).
//   "highest" (the default): F32 products, summed in F32.
//   "high": TF32 products on GPUs in torch; this CPU backend has no TF32, so it runs as
//           "highest" (get_float32_matmul_precision still returns "high").
//   "medium": each operand rounded to BF16 (round to nearest even), the products summed in F32,
//           the result F32 (kernels/gemm_bf16.hpp, what `kael train --precision bf16` runs).
//           Needs AMX-BF16 or AVX512-BF16 on the active kernel set; where they are missing the
//           products run as "highest", since torch treats the setting as a hint, not a demand.
// Covered: matmul (and bmm and einsum, built on it) and linear, in both directions; F64
// products, convolution, the recurrent layers and the causal attention kernels of
// scaled_dot_product_attention keep F32 whatever the setting.
#pragma once

#include <string>
#include <string_view>

namespace kael {

// ValueError unless `precision` is "highest", "high" or "medium".
void set_float32_matmul_precision(std::string_view precision);
std::string get_float32_matmul_precision();

}  // namespace kael
