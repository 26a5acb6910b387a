#include "kernels/elementwise.hpp"

#include "kernels/dispatch/kernel_table.hpp"
#include "kernels/infra/thread_pool.hpp"

namespace kael::kernels {

void gelu_new(float* out, const float* inp, std::int64_t n) {
  const KernelTable& kt = active_kernels();
  // About 32 operations an element (the portable tanh is a libm call), so long rows are split.
  parallel_for(n, min_items_per_thread(32), [&](std::int64_t first, std::int64_t last) {
    kt.gelu_new(out + first, inp + first, last - first);
  });
}

void gelu_backward(float* dinp, const float* inp, const float* dout, std::int64_t n) {
  const KernelTable& kt = active_kernels();
  parallel_for(n, min_items_per_thread(32), [&](std::int64_t first, std::int64_t last) {
    kt.gelu_backward(dinp + first, inp + first, dout + first, last - first);
  });
}

void add_inplace(float* x, const float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void embedding(float* out, const std::int32_t* tokens, const float* wte, const float* wpe, std::int64_t T,
               std::int64_t C, std::int64_t pos0) {
  for (std::int64_t t = 0; t < T; ++t) {
    const float* token_row = wte + static_cast<std::int64_t>(tokens[t]) * C;
    const float* position_row = wpe + (pos0 + t) * C;
    float* o = out + t * C;
    for (std::int64_t i = 0; i < C; ++i) o[i] = token_row[i] + position_row[i];
  }
}

}  // namespace kael::kernels
