#include "train/matmul.hpp"

#include "kernels/aligned_vector.hpp"
#include "kernels/gemm.hpp"
#include "kernels/gemm_bf16.hpp"
#include "kernels/thread_pool.hpp"
#include "train/precision.hpp"

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
  if (current_precision() == Precision::bf16) {
    // The bias stays F32, added to the sums as they leave the tiles (no pass filling out with
    // it first, and no reading it back).
    kernels::gemm_bf16(out, N, inp, K, false, w, N, false, M, N, K, /*accumulate=*/false, bias);
    return;
  }
  kernels::pack_panels(scratch, w, K, N);
  kernels::linear_packed(out, inp, scratch, bias, M, K, N);
}

void matmul_backward_input(float* dinp, const float* dout, const float* w, std::int64_t M, std::int64_t K,
                           std::int64_t N, ConvertedGradient* converted) {
  if (current_precision() == Precision::bf16 && converted != nullptr && converted->source == dout &&
      converted->M == M && converted->N == N) {
    thread_local kernels::ScratchVector<std::uint16_t> w16;  // op(b) = w^T (N, K)
    w16.resize(static_cast<std::size_t>(kernels::bf16_operand_elements(K, N)));
    kernels::pack_bf16_operand(w16.data(), w, N, true, K, N);
    kernels::gemm_bf16_prepacked(dinp, K, converted->rows.data(), w16.data(), M, K, N);
    // Used once: a later dout at the same address (the activations reuse their buffers) is new
    // data, converted again unless matmul_backward_weight has just filled this.
    converted->source = nullptr;
    return;
  }
  product(dinp, K, dout, N, false, w, N, true, M, K, N);
}

void matmul_backward_weight(float* dw, float* dbias, const float* inp, const float* dout, std::int64_t M,
                            std::int64_t K, std::int64_t N, ConvertedGradient* converted) {
  if (current_precision() == Precision::bf16) {
    // dout converted once for the product's op(b), dbias summed from that same read of it (the
    // same float adds, in the same row order, as add_column_sums), and with `converted` into
    // the rows matmul_backward_input reads too.
    thread_local kernels::ScratchVector<std::uint16_t> dout16;
    dout16.resize(static_cast<std::size_t>(kernels::bf16_operand_elements(N, M)));
    if (converted != nullptr) {
      converted->rows.resize(static_cast<std::size_t>(kernels::bf16_rows_elements(M, N)));
      kernels::pack_bf16_both(converted->rows.data(), dout16.data(), dout, N, M, N, dbias);
      converted->source = dout;
      converted->M = M;
      converted->N = N;
    } else {
      kernels::pack_bf16_operand(dout16.data(), dout, N, false, N, M, dbias);
    }
    kernels::gemm_bf16_packed(dw, N, inp, K, true, dout16.data(), K, N, M, /*accumulate=*/true);
    return;
  }
  product(dw, N, inp, K, true, dout, N, false, K, N, M, /*accumulate=*/true);
  if (dbias != nullptr) add_column_sums(dbias, dout, M, N);
}

}  // namespace kael::train
