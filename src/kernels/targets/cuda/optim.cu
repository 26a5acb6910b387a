// The optimizers' updates on CUDA devices: one thread per element, each running optim_arith.hpp's
// rule, as the CPU's loops do (no fused multiply-add: src/CMakeLists.txt).
#include <cuda_runtime_api.h>

#include "core/cuda_runtime.hpp"
#include "kernels/targets/cuda/walk.cuh"

namespace kael::kernels::cuda {

namespace {

template <bool kAddsL2, bool kLerpLow>
__global__ void adam_kernel(float* p, const float* g, float* m, float* v, std::int64_t n,
                            arith::AdamConstants<float> c) {
  KAEL_CUDA_FOR_EACH(i, n) arith::adam_element<float, kAddsL2, kLerpLow>(p[i], g[i], m[i], v[i], c);
}

__global__ void sgd_kernel(float* p, const float* g, std::int64_t n, arith::SgdConstants<float> c) {
  KAEL_CUDA_FOR_EACH(i, n) arith::sgd_element(p[i], g[i], c);
}

__global__ void sgd_momentum_kernel(float* p, const float* g, float* buf, bool first, std::int64_t n,
                                    arith::SgdConstants<float> c) {
  KAEL_CUDA_FOR_EACH(i, n) arith::sgd_momentum_element(p[i], g[i], buf[i], first, c);
}

}  // namespace

void adam_f32(int device, float* p, const float* g, float* m, float* v, std::int64_t n,
              const arith::AdamConstants<float>& constants, bool adds_l2, bool lerp_low) {
  if (n == 0) return;
  cuda_runtime::set_device(device);
  const unsigned blocks = blocks_for(n);
  if (adds_l2 && lerp_low) adam_kernel<true, true><<<blocks, kThreads>>>(p, g, m, v, n, constants);
  else if (adds_l2) adam_kernel<true, false><<<blocks, kThreads>>>(p, g, m, v, n, constants);
  else if (lerp_low) adam_kernel<false, true><<<blocks, kThreads>>>(p, g, m, v, n, constants);
  else adam_kernel<false, false><<<blocks, kThreads>>>(p, g, m, v, n, constants);
  cuda_runtime::check_launch(device, "adam_f32");
}

void sgd_f32(int device, float* p, const float* g, float* buf, bool first, std::int64_t n,
             const arith::SgdConstants<float>& constants) {
  if (n == 0) return;
  cuda_runtime::set_device(device);
  if (buf == nullptr) sgd_kernel<<<blocks_for(n), kThreads>>>(p, g, n, constants);
  else sgd_momentum_kernel<<<blocks_for(n), kThreads>>>(p, g, buf, first, n, constants);
  cuda_runtime::check_launch(device, "sgd_f32");
}

}  // namespace kael::kernels::cuda
