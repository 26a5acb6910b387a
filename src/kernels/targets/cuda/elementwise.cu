// Elementwise kernels on CUDA devices, over the arithmetic the CPU also runs (binary_arith.hpp).
#include <cuda_runtime_api.h>

#include "core/cuda_runtime.hpp"
#include "kernels/cuda.hpp"

namespace kael::kernels::cuda {

namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 65535;  // a grid-stride loop covers the rest

__global__ void binary_f32_kernel(arith::Binary op, float* out, const float* a, std::int64_t step_a, const float* b,
                                  std::int64_t step_b, std::int64_t n, float alpha) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = arith::binary(op, a[i * step_a], b[i * step_b], alpha);
}

unsigned blocks_for(std::int64_t n) {
  const std::int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

}  // namespace

void binary_f32(int device, arith::Binary op, float* out, const float* a, std::int64_t step_a, const float* b,
                std::int64_t step_b, std::int64_t n, float alpha) {
  if (n == 0) return;
  cuda_runtime::set_device(device);
  binary_f32_kernel<<<blocks_for(n), kThreads>>>(op, out, a, step_a, b, step_b, n, alpha);
  cuda_runtime::check_launch(device, "binary_f32");
}

}  // namespace kael::kernels::cuda
