// Reductions on CUDA devices. Sums: one block per output element, each thread adding a strided share of the
// reduced elements in double, then the block's shares added as a tree in shared memory. The
// order is fixed by the shape and the block size, so a sum gives the same bits every run.
#include <cuda_runtime_api.h>

#include "core/cuda_runtime.hpp"
#include "kernels/targets/cuda/walk.cuh"

namespace kael::kernels::cuda {

namespace {

constexpr int kSumThreads = 256;  // a power of two, for the tree
constexpr std::int64_t kMaxSumBlocks = 1 << 20;  // a grid-stride loop over outputs covers the rest

__global__ void sum_f32_kernel(float* out, const float* in, Walk<1> kept, std::int64_t n_out, Walk<1> reduced,
                               std::int64_t n_reduced) {
  __shared__ double shares[kSumThreads];
  for (std::int64_t o = blockIdx.x; o < n_out; o += gridDim.x) {
    std::int64_t base[1];
    walk_offsets(kept, o, base);
    double acc = 0.0;
    for (std::int64_t r = threadIdx.x; r < n_reduced; r += blockDim.x) {
      std::int64_t at[1];
      walk_offsets(reduced, r, at);
      acc += static_cast<double>(in[base[0] + at[0]]);
    }
    shares[threadIdx.x] = acc;
    __syncthreads();
    for (int half = kSumThreads / 2; half > 0; half /= 2) {
      if (static_cast<int>(threadIdx.x) < half) shares[threadIdx.x] += shares[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0) out[o] = static_cast<float>(shares[0]);
    __syncthreads();  // shares is written again for the next output
  }
}

// The better of two candidates (value, index) by torch's rule for max and min along a dim: a
// NaN wins, the first NaN among several; else the larger (smaller) value, the first among
// equals. A total order, so the tree's shape does not change the answer.
struct Candidate {
  float value;
  std::int64_t index;
};

__device__ inline Candidate better(Candidate x, Candidate y, bool largest) {
  const bool nan_x = x.value != x.value, nan_y = y.value != y.value;
  if (nan_x || nan_y) return nan_x && (!nan_y || x.index < y.index) ? x : y;
  if (x.value != y.value) return (largest ? x.value > y.value : x.value < y.value) ? x : y;
  return x.index < y.index ? x : y;
}

__global__ void extreme_f32_kernel(float* values, std::int64_t* indices, const float* in, Walk<1> kept,
                                   std::int64_t n_out, std::int64_t step, std::int64_t n, bool largest) {
  __shared__ Candidate shares[kSumThreads];
  for (std::int64_t o = blockIdx.x; o < n_out; o += gridDim.x) {
    std::int64_t base[1];
    walk_offsets(kept, o, base);
    Candidate best{in[base[0]], 0};
    for (std::int64_t r = threadIdx.x; r < n; r += blockDim.x) best = better(best, {in[base[0] + r * step], r}, largest);
    shares[threadIdx.x] = best;
    __syncthreads();
    for (int half = kSumThreads / 2; half > 0; half /= 2) {
      if (static_cast<int>(threadIdx.x) < half)
        shares[threadIdx.x] = better(shares[threadIdx.x], shares[threadIdx.x + half], largest);
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      values[o] = shares[0].value;
      indices[o] = shares[0].index;
    }
    __syncthreads();
  }
}

}  // namespace

void extreme_f32(int device, float* values, std::int64_t* indices, const float* in, const Walk<1>& kept,
                 std::int64_t n_out, std::int64_t step, std::int64_t n, bool largest) {
  if (n_out == 0) return;
  cuda_runtime::set_device(device);
  const auto blocks = static_cast<unsigned>(n_out < kMaxSumBlocks ? n_out : kMaxSumBlocks);
  extreme_f32_kernel<<<blocks, kSumThreads>>>(values, indices, in, kept, n_out, step, n, largest);
  cuda_runtime::check_launch(device, "extreme_f32");
}

void sum_f32(int device, float* out, const float* in, const Walk<1>& kept, std::int64_t n_out, const Walk<1>& reduced,
             std::int64_t n_reduced) {
  if (n_out == 0) return;
  cuda_runtime::set_device(device);
  const auto blocks = static_cast<unsigned>(n_out < kMaxSumBlocks ? n_out : kMaxSumBlocks);
  sum_f32_kernel<<<blocks, kSumThreads>>>(out, in, kept, n_out, reduced, n_reduced);
  cuda_runtime::check_launch(device, "sum_f32");
}

}  // namespace kael::kernels::cuda
