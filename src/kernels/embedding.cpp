#include "kernels/embedding.hpp"

#include <algorithm>

#include "kernels/infra/thread_pool.hpp"

namespace kael::kernels {
namespace {

// Columns a thread takes in the backward: each column of both tables is summed by one thread.
constexpr std::int64_t kColumnBlock = 64;

}  // namespace

void embedding(float* out, const std::int32_t* tokens, const float* wte, const float* wpe, std::int64_t T,
               std::int64_t C, std::int64_t pos0) {
  for (std::int64_t t = 0; t < T; ++t) {
    const float* token_row = wte + static_cast<std::int64_t>(tokens[t]) * C;
    const float* position_row = wpe + (pos0 + t) * C;
    float* o = out + t * C;
    for (std::int64_t i = 0; i < C; ++i) o[i] = token_row[i] + position_row[i];
  }
}

void embedding_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe, std::int64_t B,
                       std::int64_t T, std::int64_t C) {
  parallel_for(B, 1, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) embedding(out + b * T * C, tokens + b * T, wte, wpe, T, C, 0);
  });
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens, std::int64_t B,
                        std::int64_t T, std::int64_t C) {
  const std::int64_t blocks = (C + kColumnBlock - 1) / kColumnBlock;
  parallel_for(blocks, 1, [&](std::int64_t k0, std::int64_t k1) {
    const std::int64_t c0 = k0 * kColumnBlock, c1 = std::min(C, k1 * kColumnBlock);
    for (std::int64_t i = 0; i < B * T; ++i) {
      const float* d = dout + i * C;
      if (dwte) {
        float* te = dwte + std::int64_t{tokens[i]} * C;
        for (std::int64_t c = c0; c < c1; ++c) te[c] += d[c];
      }
      if (dwpe) {
        float* pe = dwpe + (i % T) * C;
        for (std::int64_t c = c0; c < c1; ++c) pe[c] += d[c];
      }
    }
  });
}

}  // namespace kael::kernels
