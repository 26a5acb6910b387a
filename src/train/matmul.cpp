#include "train/matmul.hpp"

#include <algorithm>

#include "kernels/linear.hpp"
#include "kernels/thread_pool.hpp"

namespace kael::train {
namespace {

// Rows of w^T's product computed at a time by matmul_backward_weight: bounds its scratch to
// kWeightBlock * (M + N) floats whatever K is (the head's K is the vocabulary).
constexpr std::int64_t kWeightBlock = 128;

// Column sums of dout (M, N) added to dbias, each column summed in row order.
void add_column_sums(float* dbias, const float* dout, std::int64_t M, std::int64_t N) {
  kernels::parallel_for(N, 64, [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t r = 0; r < M; ++r) {
      const float* row = dout + r * N;
      for (std::int64_t c = c0; c < c1; ++c) dbias[c] += row[c];
    }
  });
}

}  // namespace

void transpose(float* out, const float* inp, std::int64_t rows, std::int64_t cols) {
  // Tiles of 32 output rows: each input row gives 32 contiguous reads, each output row is
  // written front to back.
  constexpr std::int64_t kTile = 32;
  const std::int64_t tiles = (cols + kTile - 1) / kTile;
  kernels::parallel_for(tiles, std::max<std::int64_t>(1, 4096 / std::max<std::int64_t>(1, rows)),
                        [&](std::int64_t t0, std::int64_t t1) {
                          for (std::int64_t t = t0; t < t1; ++t) {
                            const std::int64_t c0 = t * kTile, c1 = std::min(cols, c0 + kTile);
                            for (std::int64_t r = 0; r < rows; ++r)
                              for (std::int64_t c = c0; c < c1; ++c) out[c * rows + r] = inp[r * cols + c];
                          }
                        });
}

void matmul_forward(float* out, const float* inp, const float* w, const float* bias, std::int64_t M, std::int64_t K,
                    std::int64_t N) {
  kernels::linear(out, inp, w, bias, M, K, N);
}

void matmul_backward_input(float* dinp, float* scratch, const float* dout, const float* w, std::int64_t M,
                           std::int64_t K, std::int64_t N) {
  float* wt = scratch;  // (N, K)
  transpose(wt, w, K, N);
  kernels::linear(dinp, dout, wt, nullptr, M, N, K);
}

std::int64_t matmul_weight_scratch_floats(std::int64_t M, std::int64_t N) { return kWeightBlock * (M + N); }

void matmul_backward_weight(float* dw, float* dbias, float* scratch, const float* inp, const float* dout,
                            std::int64_t M, std::int64_t K, std::int64_t N) {
  float* inp_t = scratch;                     // (kb, M): rows k0.. of inp^T
  float* product = scratch + kWeightBlock * M;  // (kb, N)
  for (std::int64_t k0 = 0; k0 < K; k0 += kWeightBlock) {
    const std::int64_t kb = std::min(kWeightBlock, K - k0);
    // inp^T rows k0..k0+kb: columns k0.. of inp (M, K).
    kernels::parallel_for(kb, 8, [&](std::int64_t j0, std::int64_t j1) {
      for (std::int64_t r = 0; r < M; ++r) {
        const float* row = inp + r * K + k0;
        for (std::int64_t j = j0; j < j1; ++j) inp_t[j * M + r] = row[j];
      }
    });
    kernels::linear(product, inp_t, dout, nullptr, kb, M, N);
    float* target = dw + k0 * N;
    kernels::parallel_for(kb * N, 1 << 14, [&](std::int64_t i0, std::int64_t i1) {
      for (std::int64_t i = i0; i < i1; ++i) target[i] += product[i];
    });
  }
  if (dbias != nullptr) add_column_sums(dbias, dout, M, N);
}

}  // namespace kael::train
