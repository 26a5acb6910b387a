#include "kernels/elementwise.hpp"

#include "kernels/dispatch/kernel_table.hpp"
#include "kernels/family/gelu_erf.hpp"
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

void gelu_erf_rows(float* out, const float* inp, std::int64_t n) {
  const KernelTable& kt = active_kernels();
  if (kt.gelu_erf != nullptr) return kt.gelu_erf(out, inp, n);
  family::gelu_erf_rows_with(out, inp, n, kt.exp);
}

void gelu_erf_backward_rows(float* dinp, const float* x, const float* g, std::int64_t n) {
  const KernelTable& kt = active_kernels();
  if (kt.gelu_erf_backward != nullptr) return kt.gelu_erf_backward(dinp, x, g, n);
  family::gelu_erf_backward_rows_with(dinp, x, g, n, kt.exp);
}

void add_inplace(float* x, const float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) x[i] += y[i];
}

namespace {

// Elements per thread of a one-pass element loop: each array streams kMinThreadBytes a thread.
constexpr std::int64_t kElementGrain = kMinThreadBytes / static_cast<std::int64_t>(sizeof(float));

}  // namespace

void add(float* out, const float* x, const float* y, std::int64_t n) {
  parallel_for(n, kElementGrain, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t i = first; i < last; ++i) out[i] = x[i] + y[i];
  });
}

void scale(float* x, float factor, std::int64_t n) {
  parallel_for(n, kElementGrain, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t i = first; i < last; ++i) x[i] *= factor;
  });
}

void dropout(float* x, const DropoutMask& mask, std::int64_t n) {
  if (!mask.active()) return;
  parallel_for(n, kElementGrain, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t i = first; i < last; ++i) x[i] *= mask.factor(static_cast<std::uint64_t>(i));
  });
}

}  // namespace kael::kernels
