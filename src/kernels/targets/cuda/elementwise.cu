// Elementwise kernels on CUDA devices, over the arithmetic the CPU also runs (binary_arith.hpp,
// unary_arith.hpp), on any broadcast and strided layout (walk.cuh).
#include <cuda_runtime_api.h>

#include "core/cuda_runtime.hpp"
#include "kernels/targets/cuda/walk.cuh"

namespace kael::kernels::cuda {

namespace {

__global__ void binary_f32_kernel(arith::Binary op, float* out, const float* a, const float* b, Walk<2> walk,
                                  std::int64_t n, float alpha) {
  KAEL_CUDA_FOR_EACH(i, n) {
    std::int64_t at[2];
    walk_offsets(walk, i, at);
    out[i] = arith::binary(op, a[at[0]], b[at[1]], alpha);
  }
}

__global__ void compare_f32_kernel(arith::Compare op, std::uint8_t* out, const float* a, const float* b, Walk<2> walk,
                                   std::int64_t n) {
  KAEL_CUDA_FOR_EACH(i, n) {
    std::int64_t at[2];
    walk_offsets(walk, i, at);
    out[i] = arith::compare(op, a[at[0]], b[at[1]]) ? 1 : 0;
  }
}

__global__ void unary_f32_kernel(arith::Unary op, float* out, const float* a, Walk<1> walk, std::int64_t n) {
  KAEL_CUDA_FOR_EACH(i, n) {
    std::int64_t at[1];
    walk_offsets(walk, i, at);
    out[i] = arith::unary(op, a[at[0]]);
  }
}

__global__ void where_f32_kernel(float* out, const std::uint8_t* condition, const float* a, const float* b,
                                 Walk<3> walk, std::int64_t n) {
  KAEL_CUDA_FOR_EACH(i, n) {
    std::int64_t at[3];
    walk_offsets(walk, i, at);
    out[i] = condition[at[0]] != 0 ? a[at[1]] : b[at[2]];
  }
}

template <class T>
__global__ void fill_kernel(T* out, T value, std::int64_t n) {
  KAEL_CUDA_FOR_EACH(i, n) out[i] = value;
}

}  // namespace

void binary_f32(int device, arith::Binary op, float* out, const float* a, const float* b, const Walk<2>& walk,
                std::int64_t n, float alpha) {
  if (n == 0) return;
  cuda_runtime::set_device(device);
  binary_f32_kernel<<<blocks_for(n), kThreads>>>(op, out, a, b, walk, n, alpha);
  cuda_runtime::check_launch(device, "binary_f32");
}

void compare_f32(int device, arith::Compare op, std::uint8_t* out, const float* a, const float* b, const Walk<2>& walk,
                 std::int64_t n) {
  if (n == 0) return;
  cuda_runtime::set_device(device);
  compare_f32_kernel<<<blocks_for(n), kThreads>>>(op, out, a, b, walk, n);
  cuda_runtime::check_launch(device, "compare_f32");
}

void unary_f32(int device, arith::Unary op, float* out, const float* a, const Walk<1>& walk, std::int64_t n) {
  if (n == 0) return;
  cuda_runtime::set_device(device);
  unary_f32_kernel<<<blocks_for(n), kThreads>>>(op, out, a, walk, n);
  cuda_runtime::check_launch(device, "unary_f32");
}

void where_f32(int device, float* out, const std::uint8_t* condition, const float* a, const float* b,
               const Walk<3>& walk, std::int64_t n) {
  if (n == 0) return;
  cuda_runtime::set_device(device);
  where_f32_kernel<<<blocks_for(n), kThreads>>>(out, condition, a, b, walk, n);
  cuda_runtime::check_launch(device, "where_f32");
}

void fill(int device, void* out, std::size_t element_size, std::uint64_t value, std::int64_t n) {
  if (n == 0) return;
  cuda_runtime::set_device(device);
  switch (element_size) {
    case 1: fill_kernel<<<blocks_for(n), kThreads>>>(static_cast<std::uint8_t*>(out), static_cast<std::uint8_t>(value), n); break;
    case 2: fill_kernel<<<blocks_for(n), kThreads>>>(static_cast<std::uint16_t*>(out), static_cast<std::uint16_t>(value), n); break;
    case 4: fill_kernel<<<blocks_for(n), kThreads>>>(static_cast<std::uint32_t*>(out), static_cast<std::uint32_t>(value), n); break;
    default: fill_kernel<<<blocks_for(n), kThreads>>>(static_cast<std::uint64_t*>(out), value, n); break;
  }
  cuda_runtime::check_launch(device, "fill");
}

}  // namespace kael::kernels::cuda
