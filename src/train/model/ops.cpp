#include "train/model/ops.hpp"

#include <algorithm>

#include "kernels/elementwise.hpp"
#include "kernels/infra/thread_pool.hpp"

namespace kael::train {
namespace {

// Columns a thread takes in the reductions that yield parameter gradients (the embeddings over
// every row): each column is summed by one thread.
constexpr std::int64_t kColumnBlock = 64;

// Minimum elements per thread for the element-wise passes.
constexpr std::int64_t kElementGrain = 1 << 14;

}  // namespace

void dropout_apply(float* x, const DropoutMask& mask, std::int64_t n) {
  if (!mask.active()) return;
  kernels::parallel_for(n, kElementGrain, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) x[i] *= mask.factor(static_cast<std::uint64_t>(i));
  });
}

void add(float* out, const float* x, const float* y, std::int64_t n) {
  kernels::parallel_for(n, kElementGrain, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) out[i] = x[i] + y[i];
  });
}

void embedding_forward(float* x, const std::int32_t* inp, const float* wte, const float* wpe, std::int64_t B,
                       std::int64_t T, std::int64_t C) {
  kernels::parallel_for(B, 1, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) kernels::embedding(x + b * T * C, inp + b * T, wte, wpe, T, C, 0);
  });
}

void embedding_backward(float* dwte, float* dwpe, const float* dx, const std::int32_t* inp, std::int64_t B,
                        std::int64_t T, std::int64_t C) {
  const std::int64_t blocks = (C + kColumnBlock - 1) / kColumnBlock;
  kernels::parallel_for(blocks, 1, [&](std::int64_t k0, std::int64_t k1) {
    const std::int64_t c0 = k0 * kColumnBlock, c1 = std::min(C, k1 * kColumnBlock);
    for (std::int64_t i = 0; i < B * T; ++i) {
      const float* d = dx + i * C;
      if (dwte) {
        float* te = dwte + std::int64_t{inp[i]} * C;
        for (std::int64_t c = c0; c < c1; ++c) te[c] += d[c];
      }
      if (dwpe) {
        float* pe = dwpe + (i % T) * C;
        for (std::int64_t c = c0; c < c1; ++c) pe[c] += d[c];
      }
    }
  });
}

}  // namespace kael::train
