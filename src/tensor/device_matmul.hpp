// matmul's products for tensors on a CUDA device, on cuBLAS (kernels/cuda.hpp, gemm_f32).
#pragma once

#include "kael/core/tensor.hpp"

namespace kael::tensor_detail {

// a (..., M, K) @ b (..., K, N) with the batch dims broadcast, float32, both on one device; no
// autograd (matmul records it). Transposed matrices are read in place, as on the CPU.
Tensor device_batched_product(const Tensor& a, const Tensor& b);

}  // namespace kael::tensor_detail
