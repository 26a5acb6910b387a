#include "kernels/linear_train.hpp"

#include "kernels/gemm.hpp"
#include "kernels/gemm_bf16.hpp"
#include "kernels/infra/aligned_vector.hpp"
#include "kernels/infra/thread_pool.hpp"

namespace kael::kernels {
namespace {

// Column sums of dout (M, N) added to dbias, each column summed in row order.
void add_column_sums(float* dbias, const float* dout, std::int64_t M, std::int64_t N) {
  parallel_for(N, 64, [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t r = 0; r < M; ++r) {
      const float* row = dout + r * N;
      for (std::int64_t c = c0; c < c1; ++c) dbias[c] += row[c];
    }
  });
}

}  // namespace

void linear_forward(float* out, float* scratch, const float* inp, const float* w, const float* bias, std::int64_t M,
                    std::int64_t K, std::int64_t N, bool bf16) {
  if (bf16) {
    // The bias stays F32, added to the sums as they leave the tiles (no pass filling out with
    // it first, and no reading it back).
    gemm_bf16(out, N, inp, K, false, w, N, false, M, N, K, /*accumulate=*/false, bias);
    return;
  }
  pack_panels(scratch, w, K, N);
  linear_packed(out, inp, scratch, bias, M, K, N);
}

void linear_backward(float* dinp, float* dw, float* dbias, const float* dout, const float* inp, const float* w,
                     std::int64_t M, std::int64_t K, std::int64_t N, bool bf16) {
  if (bf16) {
    // One read of dout converts it both ways, as op(b) of dw = inp^T dout and as the rows of
    // op(a) of dinp = dout w^T, and sums dbias (the same float adds, in the same row order, as
    // add_column_sums). The buffers are the calling thread's, kept between layers and steps.
    thread_local ScratchVector<std::uint16_t> dout_rows, dout_panels, w_panels;
    dout_rows.resize(static_cast<std::size_t>(bf16_rows_elements(M, N)));
    dout_panels.resize(static_cast<std::size_t>(bf16_operand_elements(N, M)));
    pack_bf16_both(dout_rows.data(), dout_panels.data(), dout, N, M, N, dbias);
    gemm_bf16_packed(dw, N, inp, K, true, dout_panels.data(), K, N, M, /*accumulate=*/true);
    w_panels.resize(static_cast<std::size_t>(bf16_operand_elements(K, N)));
    pack_bf16_operand(w_panels.data(), w, N, true, K, N);  // op(b) = w^T (N, K)
    gemm_bf16_prepacked(dinp, K, dout_rows.data(), w_panels.data(), M, K, N);
    return;
  }
  gemm(dw, N, inp, K, true, dout, N, false, K, N, M, /*accumulate=*/true);
  if (dbias != nullptr) add_column_sums(dbias, dout, M, N);
  gemm(dinp, K, dout, N, false, w, N, true, M, K, N);
}

}  // namespace kael::kernels
