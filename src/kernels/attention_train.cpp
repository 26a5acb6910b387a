// The training attention on the run-time-dispatched products of gemm.hpp, per (b, h) pair:
// the forward a block of query rows at a time from the scores to the output, the backward a
// block of rows at a time through d(weights), d(scores) and the four products that use them.
#include "kernels/attention_train.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/gemm.hpp"
#include "kernels/infra/lane_sum.hpp"
#include "kernels/infra/thread_pool.hpp"
#include "kernels/norm.hpp"

namespace kael::kernels {
namespace {

// A per-thread buffer of at least n floats, kept between calls (so a training step allocates
// nothing once the largest size has been seen).
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
PanelView transposed_panels(float* panels, const float* x, std::int64_t ld, std::int64_t T, std::int64_t n) {
  const std::int64_t count = (T + kPanel - 1) / kPanel, size = kPanel * n;
  std::fill(panels + (count - 1) * size, panels + count * size, 0.0f);
  for (std::int64_t s = 0; s < T; ++s) {
    float* column = panels + (s / kPanel) * size + s % kPanel;
    for (std::int64_t d = 0; d < n; ++d) column[d * kPanel] = x[s * ld + d];
  }
  return {panels, kPanel, size, false};
}

// Floats transposed_panels writes.
std::int64_t transposed_panels_floats(std::int64_t T, std::int64_t n) { return (T + kPanel - 1) / kPanel * kPanel * n; }

}  // namespace

void causal_attention_forward(float* out, float* probs, const float* q_all, const float* k_all, const float* v_all,
                              std::int64_t ld, const DropoutMask& dropout, std::int64_t B, std::int64_t T,
                              std::int64_t NH, std::int64_t hd) {
  if (B * NH * T * hd == 0) return;
  const std::int64_t C = NH * hd;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  parallel_for(B * NH, 1, [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t pair = p0; pair < p1; ++pair) {
      const std::int64_t b = pair / NH, h = pair % NH, offset = b * T * ld + h * hd;
      const float* q = q_all + offset;
      const float* k = k_all + offset;
      const float* v = v_all + offset;
      float* p = probs + pair * T * T;  // (T, T)
      const PanelView keys = transposed_panels(thread_scratch(3, transposed_panels_floats(T, hd)), k, ld, T, hd);
      // v (T, hd) contiguous, as in the backward.
      float* values = thread_scratch(2, T * hd);
      for (std::int64_t t = 0; t < T; ++t) std::copy(v + t * ld, v + t * ld + hd, values + t * hd);
      float* o = out + b * T * C + h * hd;
      // A block of rows at a time, from the scores to the output, while its rows are in cache
      // (the whole (T, T) scores, then the whole weights, went through memory three times).
      causal_blocks(T, [&](std::int64_t t0, std::int64_t rows) {
        float* block = p + t0 * T;
        gemm_view(block, T, q + t0 * ld, ld, keys, rows, t0 + rows, hd);
        for (std::int64_t t = t0; t < t0 + rows; ++t) {
          float* row = p + t * T;
          for (std::int64_t s = 0; s <= t; ++s) row[s] *= scale;
          softmax(row, row, t + 1);
          std::fill(row + t + 1, row + T, 0.0f);
        }
        const float* weights = block;
        if (dropout.active()) {
          float* dropped = thread_scratch(0, kCausalRows * T);  // (rows, T)
          for (std::int64_t i = 0; i < rows * T; ++i)
            dropped[i] = block[i] * dropout.factor(static_cast<std::uint64_t>(pair * T * T + t0 * T + i));
          weights = dropped;
        }
        gemm_nn(o + t0 * C, C, weights, T, values, hd, rows, hd, t0 + rows);
      });
    }
  });
}

void causal_attention_backward(float* dq_all, float* dk_all, float* dv_all, const float* dout, const float* q_all,
                               const float* k_all, const float* v_all, std::int64_t ld, const float* probs,
                               const DropoutMask& dropout, std::int64_t B, std::int64_t T, std::int64_t NH,
                               std::int64_t hd) {
  if (B * NH * T * hd == 0) return;
  const std::int64_t C = NH * hd;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  parallel_for(B * NH, 1, [&](std::int64_t p0, std::int64_t p1) {
    float* dp = thread_scratch(0, kBackwardRows * T);  // (rows, S): a block's d(weights), then d(scores)
    float* dropped = dropout.active() ? thread_scratch(1, kBackwardRows * T) : nullptr;  // (rows, S): after dropout
    // The head's q, k, v and dy, each (T, hd) contiguous: as the B operand of a product, rows
    // ld floats apart would touch a new page at every k.
    float* head = thread_scratch(2, 4 * T * hd);
    float* q = head;
    float* k = head + T * hd;
    float* v = head + 2 * T * hd;
    float* dy = head + 3 * T * hd;
    for (std::int64_t pair = p0; pair < p1; ++pair) {
      const std::int64_t b = pair / NH, h = pair % NH, offset = b * T * ld + h * hd;
      float* dq = dq_all + offset;
      float* dk = dk_all + offset;
      float* dv = dv_all + offset;
      for (std::int64_t t = 0; t < T; ++t) {
        const std::int64_t row = offset + t * ld;
        std::copy(q_all + row, q_all + row + hd, q + t * hd);
        std::copy(k_all + row, k_all + row + hd, k + t * hd);
        std::copy(v_all + row, v_all + row + hd, v + t * hd);
        const float* dy_row = dout + (b * T + t) * C + h * hd;
        std::copy(dy_row, dy_row + hd, dy + t * hd);
        std::fill(dk + t * ld, dk + t * ld + hd, 0.0f);  // dk and dv gather every block's terms
        std::fill(dv + t * ld, dv + t * ld + hd, 0.0f);
      }
      const float* p = probs + pair * T * T;
      const PanelView values = transposed_panels(thread_scratch(3, transposed_panels_floats(T, hd)), v, hd, T, hd);
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
              dropped[i * S + s] =
                  weights[i * T + s] * dropout.factor(static_cast<std::uint64_t>(pair * T * T + (t0 + i) * T + s));
          weights = dropped;
          lda = S;
        }
        // out = weights @ v: d(weights) = dy @ v^T (row t used up to column t: the softmax
        // backward below zeroes the rest), dv += weights^T @ dy.
        for (std::int64_t r0 = 0; r0 < rows; r0 += kCausalRows) {
          const std::int64_t r = std::min(kCausalRows, rows - r0);
          gemm_view(dp + r0 * S, S, dy + (t0 + r0) * hd, hd, values, r, t0 + r0 + r, hd);
        }
        gemm_tn(dv, ld, weights, lda, dy + t0 * hd, hd, S, hd, rows, /*accumulate=*/true);
        for (std::int64_t i = 0; i < rows; ++i) {
          const std::int64_t t = t0 + i;
          const float* pr = p + t * T;
          float* d = dp + i * S;
          if (dropout.active())
            for (std::int64_t s = 0; s <= t; ++s) d[s] *= dropout.factor(static_cast<std::uint64_t>(pair * T * T + t * T + s));
          // Softmax backward, then the 1/sqrt(hd) of the scores.
          const float fdot =
              static_cast<float>(lane_sum_double(t + 1, [&](std::int64_t s) { return static_cast<double>(pr[s]) * d[s]; }));
          for (std::int64_t s = 0; s <= t; ++s) d[s] = pr[s] * (d[s] - fdot) * scale;
          std::fill(d + t + 1, d + S, 0.0f);
        }
        // scores = q @ k^T: dq = dS @ k, dk += dS^T @ q.
        for (std::int64_t r0 = 0; r0 < rows; r0 += kCausalRows) {
          const std::int64_t r = std::min(kCausalRows, rows - r0);
          gemm_nn(dq + (t0 + r0) * ld, ld, dp + r0 * S, S, k, hd, r, hd, t0 + r0 + r);
        }
        gemm_tn(dk, ld, dp, S, q + t0 * hd, hd, S, hd, rows, /*accumulate=*/true);
      }
    }
  });
}

}  // namespace kael::kernels
