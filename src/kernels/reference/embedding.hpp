// Plain references for kernels::embedding_forward and embedding_backward (embedding.hpp): the
// obvious loops, no threads, templated on the number type so that the same loops serve the float
// kernels' tests and finite-difference checks in double. Same arguments as the kernels.
#pragma once

#include <cstdint>

namespace kael::kernels::ref {

template <class R>
void embedding_forward(R* out, const std::int32_t* tokens, const R* wte, const R* wpe, std::int64_t B,
                       std::int64_t T, std::int64_t C) {
  for (std::int64_t i = 0; i < B * T; ++i)
    for (std::int64_t c = 0; c < C; ++c) out[i * C + c] = wte[tokens[i] * C + c] + wpe[(i % T) * C + c];
}

template <class R>
void embedding_backward(R* dwte, R* dwpe, const R* dout, const std::int32_t* tokens, std::int64_t B, std::int64_t T,
                        std::int64_t C) {
  for (std::int64_t i = 0; i < B * T; ++i)
    for (std::int64_t c = 0; c < C; ++c) {
      dwte[tokens[i] * C + c] += dout[i * C + c];
      dwpe[(i % T) * C + c] += dout[i * C + c];
    }
}

}  // namespace kael::kernels::ref
