#include "train/matmul.hpp"

#include "kernels/gemm.hpp"
#include "kernels/thread_pool.hpp"

namespace kael::train {
namespace {

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

void matmul_forward(float* out, float* scratch, const float* inp, const float* w, const float* bias, std::int64_t M,
                    std::int64_t K, std::int64_t N) {
  kernels::pack_panels(scratch, w, K, N);
  kernels::linear_packed(out, inp, scratch, bias, M, K, N);
}

void matmul_backward_input(float* dinp, const float* dout, const float* w, std::int64_t M, std::int64_t K,
                           std::int64_t N) {
  kernels::gemm(dinp, K, dout, N, false, w, N, true, M, K, N);
}

void matmul_backward_weight(float* dw, float* dbias, const float* inp, const float* dout, std::int64_t M,
                            std::int64_t K, std::int64_t N) {
  kernels::gemm(dw, N, inp, K, true, dout, N, false, K, N, M, /*accumulate=*/true);
  if (dbias != nullptr) add_column_sums(dbias, dout, M, N);
}

}  // namespace kael::train
