// What every elementwise CUDA kernel shares: the launch shape (a grid-stride loop) and the
// offsets of element i of a Walk in each input.
#pragma once

#include "kernels/cuda.hpp"

namespace kael::kernels::cuda {

inline constexpr int kThreads = 256;
inline constexpr std::int64_t kMaxBlocks = 65535;  // a grid-stride loop covers the rest

inline unsigned blocks_for(std::int64_t n) {
  const std::int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// offsets[k]: input k's element offset of the walk's element i (row-major over walk.shape).
template <int N>
__device__ inline void walk_offsets(const Walk<N>& walk, std::int64_t i, std::int64_t (&offsets)[N]) {
  for (int k = 0; k < N; ++k) offsets[k] = 0;
  for (int d = walk.rank - 1; d >= 0; --d) {
    const std::int64_t extent = walk.shape[d];
    const std::int64_t index = i % extent;
    i /= extent;
    for (int k = 0; k < N; ++k) offsets[k] += index * walk.strides[k][d];
  }
}

// The grid-stride loop: body(i) for every i < n.
#define KAEL_CUDA_FOR_EACH(i, n)                                                                  \
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)

}  // namespace kael::kernels::cuda
