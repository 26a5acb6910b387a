#include "kernels/elementwise.hpp"

#include <cmath>

#include "kernels/thread_pool.hpp"

namespace kael::kernels {

void gelu_new(float* out, const float* inp, std::int64_t n) {
  // tanh is a libm call per element (no vector form at baseline), so this is worth threading.
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  parallel_for(n, 8192, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t i = first; i < last; ++i) {
      const float x = inp[i];
      out[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
    }
  });
}

void add_inplace(float* x, const float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void embedding(float* out, const std::int32_t* tokens, const float* wte, const float* wpe, std::int64_t T,
               std::int64_t C, std::int64_t pos0) {
  for (std::int64_t t = 0; t < T; ++t) {
    const float* token_row = wte + static_cast<std::int64_t>(tokens[t]) * C;
    const float* position_row = wpe + (pos0 + t) * C;
    float* o = out + t * C;
    for (std::int64_t i = 0; i < C; ++i) o[i] = token_row[i] + position_row[i];
  }
}

}  // namespace kael::kernels
