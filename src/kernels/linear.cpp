// The linear products on unpacked weights, on the run-time-dispatched kernels.
//
// linear: a weight in the checkpoint's (C, OC) layout is read as panels of 16 columns with the
// full row stride, so the same micro-kernels as linear_packed apply; packing at load
// (gemm.hpp) only makes each thread's reads one contiguous stream. The model packs its
// weights; this form serves callers that hold plain matrices.
// linear_nt: the tied head (vocab, C) is already what a dot-product kernel streams best, one
// contiguous row per output; threads take ranges of rows.
#include "kernels/linear.hpp"

#include <algorithm>

#include "kernels/cpu_features.hpp"
#include "kernels/gemm.hpp"
#include "kernels/isa.hpp"
#include "kernels/thread_pool.hpp"

namespace kael::kernels {

void linear(float* out, const float* inp, const float* weight, const float* bias, std::int64_t T, std::int64_t C,
            std::int64_t OC) {
  const std::int64_t panels = (OC + kPanel - 1) / kPanel;
  const std::int64_t min_panels = std::max<std::int64_t>(1, (1 << 18) / std::max<std::int64_t>(1, T * C * kPanel));
  const bool avx2 = active_isa() == Isa::avx2;
  parallel_for(panels, min_panels, [&](std::int64_t first, std::int64_t last) {
    const std::int64_t col = first * kPanel;
    const std::int64_t cols = std::min(OC, last * kPanel) - col;
    const float* bs = bias ? bias + col : nullptr;
    if (avx2)
      avx2::gemm_panels(out + col, OC, inp, C, weight + col, OC, kPanel, false, T, cols, C, bs, Epilogue::store);
    else
      portable::gemm_panels(out + col, OC, inp, C, weight + col, OC, kPanel, false, T, cols, C, bs, Epilogue::store);
  });
}

void linear_nt(float* out, const float* inp, const float* weight, std::int64_t T, std::int64_t C, std::int64_t N) {
  // Memory-bound at small T: each weight row is read once and used for T dot products.
  const std::int64_t min_rows = std::max<std::int64_t>(1, (1 << 18) / std::max<std::int64_t>(1, T * C));
  parallel_for(N, min_rows, [&](std::int64_t first, std::int64_t last) {
    gemm_nt(out + first, N, inp, C, weight + first * C, C, T, last - first, C, 1.0f);
  });
}

}  // namespace kael::kernels
