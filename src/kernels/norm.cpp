#include "kernels/norm.hpp"

#include "kernels/dispatch/kernel_table.hpp"
#include "kernels/infra/thread_pool.hpp"

namespace kael::kernels {

void layernorm(float* out, const float* inp, const float* weight, const float* bias, std::int64_t T, std::int64_t C,
               float eps) {
  const KernelTable& kt = active_kernels();
  // About 16 operations an element (two sums, the normalization), counted as multiply-adds.
  parallel_for(T, min_items_per_thread(16 * C), [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t t = first; t < last; ++t) kt.layernorm_row(out + t * C, inp + t * C, weight, bias, C, eps);
  });
}

void softmax(float* out, const float* inp, std::int64_t n) { active_kernels().softmax(out, inp, n); }

}  // namespace kael::kernels
