#include "kernels/norm.hpp"

#include <algorithm>
#include <vector>

#include "kernels/dispatch/kernel_table.hpp"
#include "kernels/infra/lane_sum.hpp"
#include "kernels/infra/thread_pool.hpp"

namespace kael::kernels {
namespace {

// Rows of layer_norm_backward whose dweight and dbias terms are summed together (in row order)
// before the blocks' sums are added (in block order): dinp and the parameter gradients come
// from one pass over dout and inp, in an order that does not depend on the threads.
constexpr std::int64_t kNormRowBlock = 32;

// Columns a thread takes when the blocks' sums are added.
constexpr std::int64_t kColumnBlock = 64;

// The calling thread's buffer of at least n doubles, kept between calls (a training step
// allocates nothing once the largest size has been seen); the workers write to it by pointer.
double* block_sums(std::int64_t n) {
  thread_local std::vector<double> buffer;
  if (static_cast<std::int64_t>(buffer.size()) < n) buffer.resize(static_cast<std::size_t>(n));
  return buffer.data();
}

// One block of rows of layer_norm_backward: dinp's rows, and the block's dweight and dbias
// sums in block_dw and block_db (C each). HasWeight: a null weight is 1, without a branch in the loops.
template <bool HasWeight>
void backward_rows(float* dinp, double* block_dw, double* block_db, const float* dout, const float* inp,
                   const float* weight, const float* mean, const float* rstd, std::int64_t r0, std::int64_t r1,
                   std::int64_t C) {
  const auto w = [weight](std::int64_t c) { return HasWeight ? weight[c] : 1.0f; };
  std::fill(block_dw, block_dw + C, 0.0);
  std::fill(block_db, block_db + C, 0.0);
  for (std::int64_t r = r0; r < r1; ++r) {
    const float* x = inp + r * C;
    const float* dy = dout + r * C;
    const float m = mean[r], s = rstd[r];
    const double sum_dxhat = lane_sum_double(C, [&](std::int64_t c) { return double{dy[c] * w(c)}; });
    const double sum_dxhat_xhat =
        lane_sum_double(C, [&](std::int64_t c) { return double{dy[c] * w(c) * ((x[c] - m) * s)}; });
    const float mean_dxhat = static_cast<float>(sum_dxhat / static_cast<double>(C));
    const float mean_dxhat_xhat = static_cast<float>(sum_dxhat_xhat / static_cast<double>(C));
    float* dx = dinp + r * C;
    for (std::int64_t c = 0; c < C; ++c) {
      const float xhat = (x[c] - m) * s;
      dx[c] += s * (dy[c] * w(c) - mean_dxhat - xhat * mean_dxhat_xhat);
      block_dw[c] += dy[c] * xhat;
      block_db[c] += dy[c];
    }
  }
}

}  // namespace

void layer_norm(float* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias,
                std::int64_t T, std::int64_t C, float eps) {
  const KernelTable& kt = active_kernels();
  // About 16 operations an element (two sums, the normalization), counted as multiply-adds.
  parallel_for(T, min_items_per_thread(16 * C), [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t t = first; t < last; ++t)
      kt.layer_norm_row(out + t * C, mean != nullptr ? mean + t : nullptr, rstd != nullptr ? rstd + t : nullptr,
                        inp + t * C, weight, bias, C, eps);
  });
}

void layer_norm(float* out, const float* inp, const float* weight, const float* bias, std::int64_t T, std::int64_t C,
                float eps) {
  layer_norm(out, nullptr, nullptr, inp, weight, bias, T, C, eps);
}

void layer_norm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                         const float* weight, const float* mean, const float* rstd, std::int64_t T, std::int64_t C) {
  if (T <= 0 || C <= 0) return;
  const std::int64_t blocks = (T + kNormRowBlock - 1) / kNormRowBlock;
  double* partial = block_sums(2 * blocks * C);  // (blocks, 2, C): a block's dweight sums, then its dbias sums
  parallel_for(blocks, 1, [&](std::int64_t k0, std::int64_t k1) {
    for (std::int64_t k = k0; k < k1; ++k) {
      double* block_dw = partial + k * 2 * C;
      const std::int64_t r0 = k * kNormRowBlock, r1 = std::min(T, r0 + kNormRowBlock);
      if (weight != nullptr)
        backward_rows<true>(dinp, block_dw, block_dw + C, dout, inp, weight, mean, rstd, r0, r1, C);
      else
        backward_rows<false>(dinp, block_dw, block_dw + C, dout, inp, weight, mean, rstd, r0, r1, C);
    }
  });
  if (dweight == nullptr && dbias == nullptr) return;
  // The blocks' sums, added in block order.
  parallel_for(C, kColumnBlock, [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t c = c0; c < c1; ++c) {
      double sum_w = 0, sum_b = 0;
      for (std::int64_t k = 0; k < blocks; ++k) {
        sum_w += partial[k * 2 * C + c];
        sum_b += partial[k * 2 * C + C + c];
      }
      if (dweight != nullptr) dweight[c] += static_cast<float>(sum_w);
      if (dbias != nullptr) dbias[c] += static_cast<float>(sum_b);
    }
  });
}

void softmax(float* out, const float* inp, std::int64_t n) { active_kernels().softmax(out, inp, n); }

}  // namespace kael::kernels
