// Plain references for kernels::causal_attention_forward and causal_attention_backward
// (attention_train.hpp): the obvious loops, no threads, templated on the number type so that
// the same loops serve the float kernels' tests and finite-difference checks in double. Same
// arguments and layout as the kernels.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/random.hpp"

namespace kael::kernels::ref {

// Probability i through the dropout mask.
template <class R>
R dropped(const R* probs, const DropoutMask& dropout, std::int64_t i) {
  return dropout.active() ? probs[i] * static_cast<R>(dropout.factor(static_cast<std::uint64_t>(i))) : probs[i];
}

template <class R>
void causal_attention_forward(R* out, R* probs, const R* q, const R* k, const R* v, std::int64_t ld,
                              const DropoutMask& dropout, std::int64_t B, std::int64_t T, std::int64_t NH,
                              std::int64_t hd) {
  const std::int64_t C = NH * hd;
  const R scale = R(1) / std::sqrt(static_cast<R>(hd));
  const auto at = [&](std::int64_t b, std::int64_t t, std::int64_t h) { return (b * T + t) * ld + h * hd; };
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < NH; ++h) {
      const std::int64_t base = (b * NH + h) * T * T;
      R* p = probs + base;
      for (std::int64_t t = 0; t < T; ++t) {
        R top = -INFINITY;
        for (std::int64_t s = 0; s < T; ++s) {
          R dot = 0;
          for (std::int64_t d = 0; d < hd; ++d) dot += q[at(b, t, h) + d] * k[at(b, s, h) + d];
          p[t * T + s] = s <= t ? dot * scale : R(0);
          if (s <= t && p[t * T + s] > top) top = p[t * T + s];
        }
        R sum = 0;
        for (std::int64_t s = 0; s <= t; ++s) sum += (p[t * T + s] = std::exp(p[t * T + s] - top));
        for (std::int64_t s = 0; s <= t; ++s) p[t * T + s] /= sum;
        for (std::int64_t d = 0; d < hd; ++d) {
          R acc = 0;
          for (std::int64_t s = 0; s <= t; ++s) acc += dropped(probs, dropout, base + t * T + s) * v[at(b, s, h) + d];
          out[(b * T + t) * C + h * hd + d] = acc;
        }
      }
    }
}

template <class R>
void causal_attention_backward(R* dq, R* dk, R* dv, const R* dout, const R* q, const R* k, const R* v, std::int64_t ld,
                               const R* probs, const DropoutMask& dropout, std::int64_t B, std::int64_t T,
                               std::int64_t NH, std::int64_t hd) {
  const std::int64_t C = NH * hd;
  const R scale = R(1) / std::sqrt(static_cast<R>(hd));
  const auto at = [&](std::int64_t b, std::int64_t t, std::int64_t h) { return (b * T + t) * ld + h * hd; };
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t h = 0; h < NH; ++h)
        for (std::int64_t d = 0; d < hd; ++d) dq[at(b, t, h) + d] = dk[at(b, t, h) + d] = dv[at(b, t, h) + d] = 0;
  std::vector<R> dp(static_cast<std::size_t>(T));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < NH; ++h)
      for (std::int64_t t = 0; t < T; ++t) {
        const std::int64_t row = (b * NH + h) * T * T + t * T;
        const R* dy = dout + (b * T + t) * C + h * hd;
        // d(weight[t, s]) = dy . v[s]; dv[s] += weight[t, s] dy; dp = d(weight) * mask factor.
        R dot = 0;
        for (std::int64_t s = 0; s <= t; ++s) {
          R dw = 0;
          for (std::int64_t d = 0; d < hd; ++d) dw += dy[d] * v[at(b, s, h) + d];
          const R w = dropped(probs, dropout, row + s);
          for (std::int64_t d = 0; d < hd; ++d) dv[at(b, s, h) + d] += w * dy[d];
          dp[s] = dropout.active() ? dw * static_cast<R>(dropout.factor(static_cast<std::uint64_t>(row + s))) : dw;
          dot += probs[row + s] * dp[s];
        }
        for (std::int64_t s = 0; s <= t; ++s) {
          const R ds = probs[row + s] * (dp[s] - dot) * scale;
          for (std::int64_t d = 0; d < hd; ++d) {
            dq[at(b, t, h) + d] += ds * k[at(b, s, h) + d];
            dk[at(b, s, h) + d] += ds * q[at(b, t, h) + d];
          }
        }
      }
}

}  // namespace kael::kernels::ref
