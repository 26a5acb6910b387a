#include "kernels/elementwise.hpp"

#include <algorithm>
#include <cmath>

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

namespace {

// Elements per block of the exact GELU: its two scratch rows stay in L1.
constexpr std::int64_t kGeluBlock = 256;

// The exact GELU's parts, a vector loop rather than the C library's erff per element, with
// e^(-x^2/2) from the kernel table's exp. For z = |x| / sqrt(2) it gives
// 1 - erf(z) = t p(t) e^(-z^2) directly, so 1 + erf(x / sqrt(2)) keeps its relative accuracy
// where x is very negative. `cdf` gets 1 + erf(x / sqrt(2)) (twice the normal CDF), `gauss`
// e^(-x^2/2); n <= kGeluBlock.
// Branch-free and on restrict pointers, so that the compiler vectorizes both loops.
void gelu_erf_parts(float* __restrict cdf, float* __restrict gauss, const float* __restrict x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) gauss[i] = -0.5f * x[i] * x[i];
  kernels::active_kernels().exp(gauss, gauss, n);
  for (std::int64_t i = 0; i < n; ++i) {
    const float t = 1.0f / (1.0f + 0.3275911f * (std::fabs(x[i]) * 0.70710678f));
    const float p = ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t + 0.254829592f) * t;
    const float tail = p * gauss[i];  // 1 - erf(|x| / sqrt(2))
    const float positive = x[i] >= 0.0f ? 1.0f : 0.0f;
    cdf[i] = tail + positive * (2.0f - 2.0f * tail);  // 2 - tail for x >= 0, tail below (and NaN for NaN)
  }
}

}  // namespace

void gelu_erf_rows(float* out, const float* inp, std::int64_t n) {
  float cdf[kGeluBlock], gauss[kGeluBlock];
  for (std::int64_t i0 = 0; i0 < n; i0 += kGeluBlock) {
    const std::int64_t m = std::min(kGeluBlock, n - i0);
    gelu_erf_parts(cdf, gauss, inp + i0, m);
    for (std::int64_t i = 0; i < m; ++i) out[i0 + i] = 0.5f * inp[i0 + i] * cdf[i];
  }
}

void gelu_erf_backward_rows(float* dinp, const float* x, const float* g, std::int64_t n) {
  float cdf[kGeluBlock], gauss[kGeluBlock];
  for (std::int64_t i0 = 0; i0 < n; i0 += kGeluBlock) {
    const std::int64_t m = std::min(kGeluBlock, n - i0);
    gelu_erf_parts(cdf, gauss, x + i0, m);
    for (std::int64_t i = 0; i < m; ++i)
      dinp[i0 + i] = g[i0 + i] * (0.5f * cdf[i] + x[i0 + i] * gauss[i] * 0.3989422804014327f);
  }
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
