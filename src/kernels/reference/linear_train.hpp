// Plain references for kernels::linear_forward and linear_backward (linear_train.hpp): the
// obvious loops, no threads, templated on the number type so that the same loops serve the float
// kernels' tests and finite-difference checks in double. The backward is split in its two
// products; linear_backward_weight accumulates (+=) into dw and dbias, as the kernel does.
#pragma once

#include <cstdint>

namespace kael::kernels::ref {

template <class R>
void linear_forward(R* out, const R* inp, const R* w, const R* bias, std::int64_t M, std::int64_t K,
                    std::int64_t N) {
  for (std::int64_t r = 0; r < M; ++r)
    for (std::int64_t n = 0; n < N; ++n) {
      R acc = bias ? bias[n] : R(0);
      for (std::int64_t k = 0; k < K; ++k) acc += inp[r * K + k] * w[k * N + n];
      out[r * N + n] = acc;
    }
}

template <class R>
void linear_backward_input(R* dinp, const R* dout, const R* w, std::int64_t M, std::int64_t K, std::int64_t N) {
  for (std::int64_t r = 0; r < M; ++r)
    for (std::int64_t k = 0; k < K; ++k) {
      R acc = 0;
      for (std::int64_t n = 0; n < N; ++n) acc += dout[r * N + n] * w[k * N + n];
      dinp[r * K + k] = acc;
    }
}

template <class R>
void linear_backward_weight(R* dw, R* dbias, const R* inp, const R* dout, std::int64_t M, std::int64_t K,
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

}  // namespace kael::kernels::ref
