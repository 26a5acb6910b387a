#include "train/model/ops.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cross_entropy.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/gemm.hpp"
#include "kernels/gemm_bf16.hpp"
#include "kernels/infra/lane_sum.hpp"
#include "kernels/infra/thread_pool.hpp"
#include "kernels/norm.hpp"
#include "kernels/training.hpp"

namespace kael::train {
namespace {

// Columns a thread takes in the reductions that yield parameter gradients (the embeddings over
// every row): each column is summed by one thread.
constexpr std::int64_t kColumnBlock = 64;

// Rows of the output head done at a time: the logits chunk is kHeadRows * V floats (103 MB for
// GPT-2's vocabulary), not B * T * V. Each chunk packs a copy of w and adds into all of dw, so
// fewer, larger chunks pack less often (the two sizes measured: docs/training_speed.md, "The
// measurements behind the training step's constants").
constexpr std::int64_t kHeadRows = 512;

// Vocabulary entries summed at a time in the head's dx = dlogits @ w: one float sum over all
// 50257 of them loses precision, and sums of 2048 added block by block come closer to float64
// (by how much: docs/training_speed.md, "The measurements behind the training step's
// constants").
constexpr std::int64_t kHeadVocabBlock = 2048;

// Minimum elements per thread for the element-wise passes.
constexpr std::int64_t kElementGrain = 1 << 14;

// A per-thread buffer of at least n floats, kept between calls (so a step allocates nothing
// once the largest size has been seen).
float* thread_scratch(int which, std::int64_t n) {
  thread_local std::vector<float> buffers[4];
  std::vector<float>& b = buffers[which];
  if (static_cast<std::int64_t>(b.size()) < n) b.resize(static_cast<std::size_t>(n));
  return b.data();
}

// Rows of a head's (T, T) attention matrices taken at a time by the products that yield them
// or read them by rows: row t of the weights (and of their gradient) is zero past column t, so
// a block of rows multiplies only the columns up to its last row, about half of the T x T
// products. Only exact zeros are skipped: each sum is the same chain of nonzero terms. Two
// tiles of the micro-kernel's 12 rows.
constexpr std::int64_t kCausalRows = 24;

// Calls fn(t0, rows) for the row blocks of [0, T).
template <class F>
void causal_blocks(std::int64_t T, F&& fn) {
  for (std::int64_t t0 = 0; t0 < T; t0 += kCausalRows) fn(t0, std::min(kCausalRows, T - t0));
}

// Rows of a head's attention matrices that the backward takes at a time: the block's rows of
// d(weights), then d(scores), (kBackwardRows, T) floats (256 KiB at T = 1024), stay in L2 while
// the block's four products read them, and the weights are read a row after another. Whole
// (T, T) gradients, transposed for dV = P^T dY and dK = dS^T Q, went through memory a column
// at a time: at T = 1024 each 4 KiB row put a tile's rows in the same L1 set.
constexpr std::int64_t kBackwardRows = 64;

// x^T for x (T, n; rows ld apart) as the B operand of a product (n, T): ceil(T / 16) panels of
// (n, 16), rows 16 apart, the last panel's missing columns zero. The keys and values of a head:
// the micro-kernel's product beats the dot products of gemm_nt by reusing each loaded row.
kernels::PanelView transposed_panels(float* panels, const float* x, std::int64_t ld, std::int64_t T, std::int64_t n) {
  const std::int64_t count = (T + kernels::kPanel - 1) / kernels::kPanel, size = kernels::kPanel * n;
  std::fill(panels + (count - 1) * size, panels + count * size, 0.0f);
  for (std::int64_t s = 0; s < T; ++s) {
    float* column = panels + (s / kernels::kPanel) * size + s % kernels::kPanel;
    for (std::int64_t d = 0; d < n; ++d) column[d * kernels::kPanel] = x[s * ld + d];
  }
  return {panels, kernels::kPanel, size, false};
}

// Floats transposed_panels writes.
std::int64_t transposed_panels_floats(std::int64_t T, std::int64_t n) {
  return (T + kernels::kPanel - 1) / kernels::kPanel * kernels::kPanel * n;
}

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

void attention_forward(float* out, float* probs, const float* qkv, const DropoutMask& dropout, std::int64_t B,
                       std::int64_t T, std::int64_t NH, std::int64_t hd) {
  const std::int64_t C = NH * hd, ld = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  kernels::parallel_for(B * NH, 1, [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t pair = p0; pair < p1; ++pair) {
      const std::int64_t b = pair / NH, h = pair % NH;
      const float* q = qkv + b * T * ld + h * hd;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* p = probs + pair * T * T;  // (T, T)
      const kernels::PanelView keys = transposed_panels(thread_scratch(3, transposed_panels_floats(T, hd)), k, ld, T, hd);
      // v (T, hd) contiguous, as in attention_backward.
      float* values = thread_scratch(2, T * hd);
      for (std::int64_t t = 0; t < T; ++t) std::copy(v + t * ld, v + t * ld + hd, values + t * hd);
      float* o = out + b * T * C + h * hd;
      // A block of rows at a time, from the scores to the output, while its rows are in cache
      // (the whole (T, T) scores, then the whole weights, went through memory three times).
      causal_blocks(T, [&](std::int64_t t0, std::int64_t rows) {
        float* block = p + t0 * T;
        kernels::gemm_view(block, T, q + t0 * ld, ld, keys, rows, t0 + rows, hd);
        for (std::int64_t t = t0; t < t0 + rows; ++t) {
          float* row = p + t * T;
          for (std::int64_t s = 0; s <= t; ++s) row[s] *= scale;
          kernels::softmax(row, row, t + 1);
          std::fill(row + t + 1, row + T, 0.0f);
        }
        const float* weights = block;
        if (dropout.active()) {
          float* dropped = thread_scratch(0, kCausalRows * T);  // (rows, T)
          for (std::int64_t i = 0; i < rows * T; ++i)
            dropped[i] = block[i] * dropout.factor(static_cast<std::uint64_t>(pair * T * T + t0 * T + i));
          weights = dropped;
        }
        kernels::gemm_nn(o + t0 * C, C, weights, T, values, hd, rows, hd, t0 + rows);
      });
    }
  });
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* probs,
                        const DropoutMask& dropout, std::int64_t B, std::int64_t T, std::int64_t NH,
                        std::int64_t hd) {
  const std::int64_t C = NH * hd, ld = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  kernels::parallel_for(B * NH, 1, [&](std::int64_t p0, std::int64_t p1) {
    float* dp = thread_scratch(0, kBackwardRows * T);       // (rows, S): a block's d(weights), then d(scores)
    float* dropped = dropout.active() ? thread_scratch(1, kBackwardRows * T) : nullptr;  // (rows, S): a block's weights after dropout
    // The head's q, k, v and dy, each (T, hd) contiguous: as the B operand of a product, rows
    // 3C floats apart would touch a new page at every k.
    float* head = thread_scratch(2, 4 * T * hd);
    float* q = head;
    float* k = head + T * hd;
    float* v = head + 2 * T * hd;
    float* dy = head + 3 * T * hd;
    for (std::int64_t pair = p0; pair < p1; ++pair) {
      const std::int64_t b = pair / NH, h = pair % NH;
      const std::int64_t offset = b * T * ld + h * hd;
      float* dq = dqkv + offset;
      float* dk = dq + C;
      float* dv = dq + 2 * C;
      for (std::int64_t t = 0; t < T; ++t) {
        const float* row = qkv + offset + t * ld;
        std::copy(row, row + hd, q + t * hd);
        std::copy(row + C, row + C + hd, k + t * hd);
        std::copy(row + 2 * C, row + 2 * C + hd, v + t * hd);
        const float* dy_row = dout + (b * T + t) * C + h * hd;
        std::copy(dy_row, dy_row + hd, dy + t * hd);
        std::fill(dk + t * ld, dk + t * ld + hd, 0.0f);  // dk and dv gather every block's terms
        std::fill(dv + t * ld, dv + t * ld + hd, 0.0f);
      }
      const float* p = probs + pair * T * T;
      const kernels::PanelView values = transposed_panels(thread_scratch(3, transposed_panels_floats(T, hd)), v, hd, T, hd);
      // Rows [t0, t0 + rows) at a time; row t's weights are zero past column t, so the block
      // needs columns [0, S) only.
      for (std::int64_t t0 = 0; t0 < T; t0 += kBackwardRows) {
        const std::int64_t rows = std::min(kBackwardRows, T - t0), S = t0 + rows;
        // The block's weights (rows, S; rows lda apart), through the forward's dropout.
        const float* weights = p + t0 * T;
        std::int64_t lda = T;
        if (dropout.active()) {
          for (std::int64_t i = 0; i < rows; ++i)
            for (std::int64_t s = 0; s < S; ++s)
              dropped[i * S + s] = weights[i * T + s] * dropout.factor(static_cast<std::uint64_t>(pair * T * T + (t0 + i) * T + s));
          weights = dropped;
          lda = S;
        }
        // out = weights @ v: d(weights) = dy @ v^T (row t used up to column t: the softmax
        // backward below zeroes the rest), dv += weights^T @ dy.
        for (std::int64_t r0 = 0; r0 < rows; r0 += kCausalRows) {
          const std::int64_t r = std::min(kCausalRows, rows - r0);
          kernels::gemm_view(dp + r0 * S, S, dy + (t0 + r0) * hd, hd, values, r, t0 + r0 + r, hd);
        }
        kernels::gemm_tn(dv, ld, weights, lda, dy + t0 * hd, hd, S, hd, rows, /*accumulate=*/true);
        for (std::int64_t i = 0; i < rows; ++i) {
          const std::int64_t t = t0 + i;
          const float* pr = p + t * T;
          float* d = dp + i * S;
          if (dropout.active())
            for (std::int64_t s = 0; s <= t; ++s) d[s] *= dropout.factor(static_cast<std::uint64_t>(pair * T * T + t * T + s));
          // Softmax backward, then the 1/sqrt(hd) of the scores.
          const float fdot =
              static_cast<float>(kernels::lane_sum_double(t + 1, [&](std::int64_t s) { return static_cast<double>(pr[s]) * d[s]; }));
          for (std::int64_t s = 0; s <= t; ++s) d[s] = pr[s] * (d[s] - fdot) * scale;
          std::fill(d + t + 1, d + S, 0.0f);
        }
        // scores = q @ k^T: dq = dS @ k, dk += dS^T @ q.
        for (std::int64_t r0 = 0; r0 < rows; r0 += kCausalRows) {
          const std::int64_t r = std::min(kCausalRows, rows - r0);
          kernels::gemm_nn(dq + (t0 + r0) * ld, ld, dp + r0 * S, S, k, hd, r, hd, t0 + r0 + r);
        }
        kernels::gemm_tn(dk, ld, dp, S, q + t0 * hd, hd, S, hd, rows, /*accumulate=*/true);
      }
    }
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

namespace {

// BF16 elements of the head's operands at --precision bf16, each converted once per call and
// read by every chunk of rows: w^T for the logits, then (for the backward) each vocabulary
// block of w for dx and one chunk's x for dw, in that order.
std::int64_t head_bf16_elements(std::int64_t R, std::int64_t C, std::int64_t V) {
  std::int64_t n = kernels::bf16_operand_elements(V, C) + kernels::bf16_operand_elements(C, R);
  for (std::int64_t v0 = 0; v0 < V; v0 += kHeadVocabBlock)
    n += kernels::bf16_operand_elements(C, std::min(kHeadVocabBlock, V - v0));
  return n;
}

}  // namespace

std::int64_t head_scratch_floats(std::int64_t M, std::int64_t C, std::int64_t V) {
  const std::int64_t R = std::min(M, kHeadRows);
  return std::max(V * C, (head_bf16_elements(R, C, V) + 1) / 2) + R * V;
}

void head_cross_entropy(float* losses, float* dx, float* dw, float* scratch, const float* x, const float* w,
                        const std::int32_t* targets, float dscale, std::int64_t M, std::int64_t C, std::int64_t V,
                        Precision precision) {
  const bool backward = dx != nullptr;
  const bool bf16 = precision == Precision::bf16;
  const std::int64_t R_max = std::min(M, kHeadRows);
  // The weight converted for the kernels once, for every chunk of rows: the head is the largest
  // weight. F32: w^T (C, V) in panels. BF16: w^T, then w's vocabulary blocks, then x's chunk.
  float* packed = scratch;
  auto* w_t16 = reinterpret_cast<std::uint16_t*>(scratch);
  std::uint16_t* w_blocks16 = w_t16 + kernels::bf16_operand_elements(V, C);
  std::uint16_t* x16 = w_t16 + head_bf16_elements(R_max, C, V) - kernels::bf16_operand_elements(C, R_max);
  float* logits = scratch + head_scratch_floats(M, C, V) - R_max * V;  // (R, V)
  if (!bf16) {
    kernels::pack_panels_transposed(packed, w, C, V);
  } else {
    kernels::pack_bf16_operand(w_t16, w, C, true, V, C);
    std::uint16_t* block16 = w_blocks16;
    for (std::int64_t v0 = 0; backward && v0 < V; v0 += kHeadVocabBlock) {
      const std::int64_t kb = std::min(kHeadVocabBlock, V - v0);
      kernels::pack_bf16_operand(block16, w + v0 * C, C, false, C, kb);
      block16 += kernels::bf16_operand_elements(C, kb);
    }
  }
  for (std::int64_t r0 = 0; r0 < M; r0 += kHeadRows) {
    const std::int64_t R = std::min(kHeadRows, M - r0);
    const float* xr = x + r0 * C;
    if (bf16)
      kernels::gemm_bf16_packed(logits, V, xr, C, false, w_t16, R, V, C);  // (R, V) = x (R, C) @ w^T
    else
      kernels::linear_packed(logits, xr, packed, nullptr, R, C, V);
    kernels::parallel_for(R, 1, [&](std::int64_t i0, std::int64_t i1) {
      for (std::int64_t i = i0; i < i1; ++i) {
        float* row = logits + i * V;
        losses[r0 + i] = kernels::cross_entropy_row(backward ? row : nullptr, row, targets[r0 + i], dscale, V);
      }
    });
    if (!backward) continue;
    // Per block of the vocabulary: dx (R, C) += dlogits[:, block] @ w[block], and
    // dw[block] (kb, C) += dlogits[:, block]^T @ x.
    float* dxr = dx + r0 * C;
    std::fill(dxr, dxr + R * C, 0.0f);
    if (bf16) kernels::pack_bf16_operand(x16, xr, C, false, C, R);
    const std::uint16_t* block16 = w_blocks16;
    for (std::int64_t v0 = 0; v0 < V; v0 += kHeadVocabBlock) {
      const std::int64_t kb = std::min(kHeadVocabBlock, V - v0);
      if (bf16) {
        kernels::gemm_bf16_packed(dxr, C, logits + v0, V, false, block16, R, C, kb, /*accumulate=*/true);
        kernels::gemm_bf16_packed(dw + v0 * C, C, logits + v0, V, true, x16, kb, C, R, /*accumulate=*/true);
        block16 += kernels::bf16_operand_elements(C, kb);
        continue;
      }
      kernels::gemm(dxr, C, logits + v0, V, false, w + v0 * C, C, false, R, C, kb, /*accumulate=*/true);
      kernels::gemm(dw + v0 * C, C, logits + v0, V, true, xr, C, false, kb, C, R, /*accumulate=*/true);
    }
  }
}

}  // namespace kael::train
