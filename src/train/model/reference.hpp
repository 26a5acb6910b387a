// Plain references for the kernels of ops.hpp and matmul.hpp: straightforward loops, templated
// on the number type. In float they are what the fast kernels are tested against on ragged
// sizes; in double they are checked against finite differences (tests/train_ops_test.cpp).
// Same arguments as the fast kernels (except scratch).
#pragma once

#include <cmath>
#include <cstdint>

#include "train/model/random.hpp"

namespace kael::train::ref {

// Probabilities through the dropout mask (element index = probs index).
template <class R>
R dropped(const R* probs, const DropoutMask& dropout, std::int64_t i) {
  return dropout.active() ? probs[i] * static_cast<R>(dropout.factor(static_cast<std::uint64_t>(i))) : probs[i];
}

template <class R>
void attention_forward(R* out, R* probs, const R* qkv, const DropoutMask& dropout, std::int64_t B, std::int64_t T,
                       std::int64_t NH, std::int64_t hd) {
  const std::int64_t C = NH * hd;
  const R scale = R(1) / std::sqrt(static_cast<R>(hd));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < NH; ++h) {
      R* p = probs + (b * NH + h) * T * T;
      for (std::int64_t t = 0; t < T; ++t) {
        const R* q = qkv + (b * T + t) * 3 * C + h * hd;
        R top = -INFINITY;
        for (std::int64_t s = 0; s < T; ++s) {
          R dot = 0;
          for (std::int64_t d = 0; d < hd; ++d) dot += q[d] * qkv[(b * T + s) * 3 * C + C + h * hd + d];
          p[t * T + s] = s <= t ? dot * scale : R(0);
          if (s <= t && p[t * T + s] > top) top = p[t * T + s];
        }
        R sum = 0;
        for (std::int64_t s = 0; s <= t; ++s) sum += (p[t * T + s] = std::exp(p[t * T + s] - top));
        for (std::int64_t s = 0; s <= t; ++s) p[t * T + s] /= sum;
        for (std::int64_t d = 0; d < hd; ++d) {
          R acc = 0;
          for (std::int64_t s = 0; s <= t; ++s)
            acc += dropped(probs, dropout, (b * NH + h) * T * T + t * T + s) *
                   qkv[(b * T + s) * 3 * C + 2 * C + h * hd + d];
          out[(b * T + t) * C + h * hd + d] = acc;
        }
      }
    }
}

template <class R>
void attention_backward(R* dqkv, const R* dout, const R* qkv, const R* probs, const DropoutMask& dropout,
                        std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t hd) {
  const std::int64_t C = NH * hd;
  const R scale = R(1) / std::sqrt(static_cast<R>(hd));
  for (std::int64_t i = 0; i < B * T * 3 * C; ++i) dqkv[i] = 0;
  const auto at = [&](std::int64_t b, std::int64_t t, std::int64_t part, std::int64_t h, std::int64_t d) {
    return (b * T + t) * 3 * C + part * C + h * hd + d;
  };
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < NH; ++h)
      for (std::int64_t t = 0; t < T; ++t) {
        const std::int64_t row = (b * NH + h) * T * T + t * T;
        const R* dy = dout + (b * T + t) * C + h * hd;
        // d(weight[t, s]) = dy . v[s]; dv[s] += weight[t, s] dy; dp = d(weight) * mask factor.
        R dp[4096];  // T <= 4096 in the tests
        R dot = 0;
        for (std::int64_t s = 0; s <= t; ++s) {
          R dw = 0;
          for (std::int64_t d = 0; d < hd; ++d) dw += dy[d] * qkv[at(b, s, 2, h, d)];
          const R w = dropped(probs, dropout, row + s);
          for (std::int64_t d = 0; d < hd; ++d) dqkv[at(b, s, 2, h, d)] += w * dy[d];
          dp[s] = dropout.active() ? dw * static_cast<R>(dropout.factor(static_cast<std::uint64_t>(row + s))) : dw;
          dot += probs[row + s] * dp[s];
        }
        for (std::int64_t s = 0; s <= t; ++s) {
          const R ds = probs[row + s] * (dp[s] - dot) * scale;
          for (std::int64_t d = 0; d < hd; ++d) {
            dqkv[at(b, t, 0, h, d)] += ds * qkv[at(b, s, 1, h, d)];
            dqkv[at(b, s, 1, h, d)] += ds * qkv[at(b, t, 0, h, d)];
          }
        }
      }
}

template <class R>
void matmul_forward(R* out, const R* inp, const R* w, const R* bias, std::int64_t M, std::int64_t K,
                    std::int64_t N) {
  for (std::int64_t r = 0; r < M; ++r)
    for (std::int64_t n = 0; n < N; ++n) {
      R acc = bias ? bias[n] : R(0);
      for (std::int64_t k = 0; k < K; ++k) acc += inp[r * K + k] * w[k * N + n];
      out[r * N + n] = acc;
    }
}

template <class R>
void matmul_backward_input(R* dinp, const R* dout, const R* w, std::int64_t M, std::int64_t K, std::int64_t N) {
  for (std::int64_t r = 0; r < M; ++r)
    for (std::int64_t k = 0; k < K; ++k) {
      R acc = 0;
      for (std::int64_t n = 0; n < N; ++n) acc += dout[r * N + n] * w[k * N + n];
      dinp[r * K + k] = acc;
    }
}

template <class R>
void matmul_backward_weight(R* dw, R* dbias, const R* inp, const R* dout, std::int64_t M, std::int64_t K,
                            std::int64_t N) {
  for (std::int64_t k = 0; k < K; ++k)
    for (std::int64_t n = 0; n < N; ++n) {
      R acc = 0;
      for (std::int64_t r = 0; r < M; ++r) acc += inp[r * K + k] * dout[r * N + n];
      dw[k * N + n] += acc;
    }
  if (dbias)
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t r = 0; r < M; ++r) dbias[n] += dout[r * N + n];
}

template <class R>
void embedding_forward(R* x, const std::int32_t* inp, const R* wte, const R* wpe, std::int64_t B, std::int64_t T,
                       std::int64_t C) {
  for (std::int64_t i = 0; i < B * T; ++i)
    for (std::int64_t c = 0; c < C; ++c) x[i * C + c] = wte[inp[i] * C + c] + wpe[(i % T) * C + c];
}

template <class R>
void embedding_backward(R* dwte, R* dwpe, const R* dx, const std::int32_t* inp, std::int64_t B, std::int64_t T,
                        std::int64_t C) {
  for (std::int64_t i = 0; i < B * T; ++i)
    for (std::int64_t c = 0; c < C; ++c) {
      dwte[inp[i] * C + c] += dx[i * C + c];
      dwpe[(i % T) * C + c] += dx[i * C + c];
    }
}

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

}  // namespace kael::train::ref
