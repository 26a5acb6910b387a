// The exact GELU, 0.5 x (1 + erf(x / sqrt(2))) (torch's default form), and its derivative, as
// plain loops the compiler vectorizes: instantiated by each vector target's table (with V's exp,
// so the loops take that target's vector width) and by kernels/elementwise.cpp for the sets
// without one. erf by Abramowitz and Stegun 7.1.26 (|error| < 1.5e-7), the formula of torch's
// vectorized CPU GELU, so very negative x keep their relative accuracy.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/family/rows.hpp"

namespace kael::kernels::family {

// Elements per block: the two scratch rows stay in L1.
inline constexpr std::int64_t kGeluErfBlock = 256;

// e^(-x^2/2) from `exp` (a RowFn). For z = |x| / sqrt(2) it gives 1 - erf(z) = t p(t) e^(-z^2)
// directly, so 1 + erf(x / sqrt(2)) keeps its relative accuracy where x is very negative. `cdf`
// gets 1 + erf(x / sqrt(2)) (twice the normal CDF), `gauss` e^(-x^2/2); n <= kGeluErfBlock.
// Branch-free and on restrict pointers, so that the compiler vectorizes both loops.
template <class Exp>
void gelu_erf_parts(float* __restrict cdf, float* __restrict gauss, const float* __restrict x, std::int64_t n,
                    Exp exp) {
  for (std::int64_t i = 0; i < n; ++i) gauss[i] = -0.5f * x[i] * x[i];
  exp(gauss, gauss, n);
  for (std::int64_t i = 0; i < n; ++i) {
    const float t = 1.0f / (1.0f + 0.3275911f * (std::fabs(x[i]) * 0.70710678f));
    const float p = ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t + 0.254829592f) * t;
    const float tail = p * gauss[i];  // 1 - erf(|x| / sqrt(2))
    const float positive = x[i] >= 0.0f ? 1.0f : 0.0f;
    cdf[i] = tail + positive * (2.0f - 2.0f * tail);  // 2 - tail for x >= 0, tail below (and NaN for NaN)
  }
}

// out (n) = gelu(inp); out may equal inp.
template <class Exp>
void gelu_erf_rows_with(float* out, const float* inp, std::int64_t n, Exp exp) {
  float cdf[kGeluErfBlock], gauss[kGeluErfBlock];
  for (std::int64_t i0 = 0; i0 < n; i0 += kGeluErfBlock) {
    const std::int64_t m = std::min(kGeluErfBlock, n - i0);
    gelu_erf_parts(cdf, gauss, inp + i0, m, exp);
    for (std::int64_t i = 0; i < m; ++i) out[i0 + i] = 0.5f * inp[i0 + i] * cdf[i];
  }
}

// dinp (n) = dout * (Phi(x) + x phi(x)); dinp may equal dout.
template <class Exp>
void gelu_erf_backward_rows_with(float* dinp, const float* x, const float* g, std::int64_t n, Exp exp) {
  float cdf[kGeluErfBlock], gauss[kGeluErfBlock];
  for (std::int64_t i0 = 0; i0 < n; i0 += kGeluErfBlock) {
    const std::int64_t m = std::min(kGeluErfBlock, n - i0);
    gelu_erf_parts(cdf, gauss, x + i0, m, exp);
    for (std::int64_t i = 0; i < m; ++i)
      dinp[i0 + i] = g[i0 + i] * (0.5f * cdf[i] + x[i0 + i] * gauss[i] * 0.3989422804014327f);
  }
}

// The RowFn and GeluBackwardFn entries. V's exp goes in as a lambda, a type of each target's own:
// passed as a function pointer, every target would instantiate the helpers above with the same
// type, and the linker would keep one target's copy for all (an AVX2 CPU could run AVX-512 code).
template <class V>
void gelu_erf_row(float* out, const float* inp, std::int64_t n) {
  gelu_erf_rows_with(out, inp, n, [](float* o, const float* x, std::int64_t m) { exp_row<V>(o, x, m); });
}
template <class V>
void gelu_erf_backward_row(float* dinp, const float* inp, const float* dout, std::int64_t n) {
  gelu_erf_backward_rows_with(dinp, inp, dout, n,
                              [](float* o, const float* x, std::int64_t m) { exp_row<V>(o, x, m); });
}

}  // namespace kael::kernels::family
