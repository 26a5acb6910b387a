// linear: a weight in the checkpoint's (C, OC) layout is read as panels of 16 columns with the
// full row stride, so the same micro-kernels as linear_packed apply; packing at load
// (gemm.hpp) only makes each thread's reads one contiguous stream. The model packs its
// weights; this form serves callers that hold plain matrices.
#include "kernels/linear.hpp"

#include <algorithm>

#include "kernels/gemm.hpp"
#include "kernels/dispatch/kernel_table.hpp"
#include "kernels/infra/thread_pool.hpp"

namespace kael::kernels {

void linear(float* out, const float* inp, const float* weight, const float* bias, std::int64_t T, std::int64_t C,
            std::int64_t OC) {
  const KernelTable& kt = active_kernels();
  parallel_for((OC + kPanel - 1) / kPanel, min_panels_per_thread(T, C), [&](std::int64_t first, std::int64_t last) {
    const std::int64_t col = first * kPanel;
    kt.gemm_panels(out + col, OC, inp, C, weight + col, OC, kPanel, false, T, std::min(OC, last * kPanel) - col, C,
                   bias ? bias + col : nullptr, Epilogue::store);
  });
}

}  // namespace kael::kernels
