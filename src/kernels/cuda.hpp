// The CUDA target's operations (targets/cuda/), called by the tensor layer for tensors on a CUDA
// device. Plain C++ declarations; they are defined only in a build with the CUDA backend
// (KAEL_WITH_CUDA), and callers check that before calling. Pointers are device memory of
// cuda:`device`; each call queues its work on that device's stream and returns.
#pragma once

#include <cstdint>

#include "kernels/binary_arith.hpp"

namespace kael::kernels::cuda {

// out[i] = arith::binary(op, a[i * step_a], b[i * step_b], alpha) for i < n; a step is 0 (one
// value for every element) or 1.
void binary_f32(int device, arith::Binary op, float* out, const float* a, std::int64_t step_a, const float* b,
                std::int64_t step_b, std::int64_t n, float alpha);

}  // namespace kael::kernels::cuda
