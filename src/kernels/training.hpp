// The element-wise kernels of training: the AdamW update and the sum of squares behind the
// gradient norm (GELU's backward is elementwise.hpp's, beside its forward). Threaded here, on
// the active kernel table; each has a plain reference in ref::.
#pragma once

#include <cstdint>

namespace kael::kernels {

// The scalars of one AdamW step, each rounded to float where torch rounds a Python float to
// the tensor's dtype. decay = 1 - lr * weight_decay, or exactly 1 for a tensor without decay.
struct AdamWScalars {
  float decay = 1.0f;
  float one_minus_beta1 = 0.1f;
  float beta2 = 0.999f;
  float one_minus_beta2 = 0.001f;
  float neg_step_size = 0.0f;          // -lr / (1 - beta1^t)
  float bias_correction2_sqrt = 1.0f;  // sqrt(1 - beta2^t)
  float eps = 1e-8f;
  float grad_scale = 1.0f;  // g = grad * grad_scale, the clipping folded in (times 1 is exact)
};

// The AdamW update of n elements, operation for operation as torch's single-tensor AdamW (each
// step rounded to float, no fused multiply-add), so every instruction set gives equal bits:
//   g = grad grad_scale; p *= decay; m += (1 - beta1) (g - m); v = v beta2 + (1 - beta2) g g;
//   p += (neg_step_size * m) / (sqrt(v) / bias_correction2_sqrt + eps)   (addcdiv's order).
// torch.optim.AdamW and Adam on F32 (src/optim/adam.cpp) take it too, where their arithmetic is this.
void adamw_update(float* param, float* m, float* v, const float* grad, std::int64_t n, const AdamWScalars& s);

// The sum of x[i]^2 (n) in double, in a fixed order whatever the instruction set or the
// thread count: blocks of 2^16 elements summed in order; within a block, element i goes to
// lane i mod 16, and the 16 lanes are added in order. (A float squared is exact in double,
// so a fused multiply-add gives the same bits as a product and a sum.)
double sum_of_squares(const float* x, std::int64_t n);

namespace ref {
// The formula above in double, each result rounded once.
void adamw_update(float* param, float* m, float* v, const float* grad, std::int64_t n, const AdamWScalars& s);
// Sequentially, in long double.
double sum_of_squares(const float* x, std::int64_t n);
}  // namespace ref

}  // namespace kael::kernels
