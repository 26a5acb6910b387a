// The plain reference for kernels::head_cross_entropy (cross_entropy.hpp): the obvious loops,
// no chunks, no threads, templated on the number type so that the same loops serve the float
// kernel's tests and finite-difference checks in double. Same arguments except scratch and the
// choice of products.
#pragma once

#include <cmath>
#include <cstdint>

namespace kael::kernels::ref {

// logits = x @ w^T per row; loss = logsumexp - logit[target]; with dx, dlogits = (softmax -
// onehot) * dscale, dx = dlogits @ w, dw += dlogits^T x. Negative targets: loss 0, dx 0.
template <class R>
void head_cross_entropy(R* losses, R* dx, R* dw, const R* x, const R* w, const std::int32_t* targets, R dscale,
                        std::int64_t M, std::int64_t C, std::int64_t V) {
  for (std::int64_t r = 0; r < M; ++r) {
    if (dx)
      for (std::int64_t c = 0; c < C; ++c) dx[r * C + c] = 0;
    if (targets[r] < 0) {
      losses[r] = 0;
      continue;
    }
    R top = -INFINITY;
    for (std::int64_t v = 0; v < V; ++v) {
      R l = 0;
      for (std::int64_t c = 0; c < C; ++c) l += x[r * C + c] * w[v * C + c];
      if (l > top) top = l;
    }
    R sum = 0, target_logit = 0;
    for (std::int64_t v = 0; v < V; ++v) {
      R l = 0;
      for (std::int64_t c = 0; c < C; ++c) l += x[r * C + c] * w[v * C + c];
      sum += std::exp(l - top);
      if (v == targets[r]) target_logit = l;
    }
    losses[r] = std::log(sum) + top - target_logit;
    if (!dx) continue;
    for (std::int64_t v = 0; v < V; ++v) {
      R l = 0;
      for (std::int64_t c = 0; c < C; ++c) l += x[r * C + c] * w[v * C + c];
      const R d = (std::exp(l - top) / sum - (v == targets[r] ? R(1) : R(0))) * dscale;
      for (std::int64_t c = 0; c < C; ++c) {
        dx[r * C + c] += d * w[v * C + c];
        dw[v * C + c] += d * x[r * C + c];
      }
    }
  }
}

}  // namespace kael::kernels::ref
