// Plain references for the kernels of ops.hpp and matmul.hpp: straightforward loops, templated
// on the number type. (The attention's and the output head's are beside their kernels, in
// kernels/reference.) In float they are what the fast kernels are tested against on ragged
// sizes; in double they are checked against finite differences (tests/train_ops_test.cpp).
// Same arguments as the fast kernels (except scratch).
#pragma once

#include <cmath>
#include <cstdint>

namespace kael::train::ref {

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

}  // namespace kael::train::ref
