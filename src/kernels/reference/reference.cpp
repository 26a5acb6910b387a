// Plain scalar references for every kernel: the obvious loops, sums in double, no threads.
// The fast kernels are tested against these (tests/kernels_*_test.cpp); the model never
// calls them.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/embedding.hpp"
#include "kernels/linear.hpp"
#include "kernels/norm.hpp"
#include "kernels/family/scalar_math.hpp"

namespace kael::kernels::ref {

void linear(float* out, const float* inp, const float* weight, const float* bias, std::int64_t T, std::int64_t C,
            std::int64_t OC) {
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t o = 0; o < OC; ++o) {
      double sum = bias ? bias[o] : 0.0;
      for (std::int64_t c = 0; c < C; ++c) sum += static_cast<double>(inp[t * C + c]) * weight[c * OC + o];
      out[t * OC + o] = static_cast<float>(sum);
    }
}

void softmax(float* out, const float* inp, std::int64_t n) {
  if (n <= 0) return;
  const double max = *std::max_element(inp, inp + n);
  std::vector<double> e(static_cast<std::size_t>(n));
  double sum = 0.0;
  for (std::int64_t i = 0; i < n; ++i) sum += e[static_cast<std::size_t>(i)] = std::exp(inp[i] - max);
  for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(e[static_cast<std::size_t>(i)] / sum);
}

void gelu_new(float* out, const float* inp, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(gelu_tanh(static_cast<double>(inp[i])));
}

void gelu_backward(float* dinp, const float* inp, const float* dout, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i)
    dinp[i] = static_cast<float>(dout[i] * gelu_tanh_derivative(static_cast<double>(inp[i])));
}

void gelu_erf(float* out, const float* inp, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const double x = inp[i];
    out[i] = static_cast<float>(0.5 * x * std::erfc(-x / std::sqrt(2.0)));  // erfc: exact in the negative tail
  }
}

void gelu_erf_backward(float* dinp, const float* inp, const float* dout, std::int64_t n) {
  const double inv_sqrt_2pi = 0.3989422804014327;
  for (std::int64_t i = 0; i < n; ++i) {
    const double x = inp[i];
    const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0)), pdf = inv_sqrt_2pi * std::exp(-0.5 * x * x);
    dinp[i] = static_cast<float>(dout[i] * (cdf + x * pdf));
  }
}

void add_inplace(float* x, const float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void embedding(float* out, const std::int32_t* tokens, const float* wte, const float* wpe, std::int64_t T,
               std::int64_t C, std::int64_t pos0) {
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t i = 0; i < C; ++i) out[t * C + i] = wte[tokens[t] * C + i] + wpe[(pos0 + t) * C + i];
}

void causal_attention(float* out, float* scratch, const float* q, const float* k_cache, const float* v_cache,
                      std::int64_t T, std::int64_t pos0, std::int64_t n_head, std::int64_t head_dim,
                      std::int64_t q_stride, std::int64_t kv_stride) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  const std::int64_t C = n_head * head_dim;
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t h = 0; h < n_head; ++h) {
      const std::int64_t pos = pos0 + t;
      const float* qh = q + t * q_stride + h * head_dim;
      float* scores = scratch;  // one row at a time is enough here
      for (std::int64_t s = 0; s <= pos; ++s) {
        double dot = 0.0;
        for (std::int64_t i = 0; i < head_dim; ++i) dot += static_cast<double>(qh[i]) * k_cache[s * kv_stride + h * head_dim + i];
        scores[s] = static_cast<float>(dot * scale);
      }
      softmax(scores, scores, pos + 1);
      for (std::int64_t i = 0; i < head_dim; ++i) {
        double sum = 0.0;
        for (std::int64_t s = 0; s <= pos; ++s) sum += static_cast<double>(scores[s]) * v_cache[s * kv_stride + h * head_dim + i];
        out[t * C + h * head_dim + i] = static_cast<float>(sum);
      }
    }
}

}  // namespace kael::kernels::ref
