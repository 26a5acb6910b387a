// Dispatch and threading for gemm.hpp: the work is split here, in baseline code, and each
// piece runs on the instruction set chosen at run time (cpu_features.hpp).
#include "kernels/gemm.hpp"

#include <algorithm>
#include <vector>

#include "kernels/cpu_features.hpp"
#include "kernels/isa.hpp"
#include "kernels/thread_pool.hpp"

namespace kael::kernels {

void pack_panels(float* dst, const float* src, std::int64_t K, std::int64_t N) {
  for (std::int64_t col = 0; col < N; col += kPanel) {
    const std::int64_t w = std::min(kPanel, N - col);
    float* panel = dst + col * K;  // (K, w)
    for (std::int64_t k = 0; k < K; ++k)
      std::copy(src + k * N + col, src + k * N + col + w, panel + k * w);
  }
}

void pack_panels_transposed(float* dst, const float* src, std::int64_t K, std::int64_t N) {
  std::vector<float> rows(static_cast<std::size_t>(kPanel * K));
  for (std::int64_t col = 0; col < N; col += kPanel) {
    const std::int64_t w = std::min(kPanel, N - col);
    std::copy(src + col * K, src + (col + w) * K, rows.begin());  // rows col.. of src, (w, K)
    float* panel = dst + col * K;                                  // (K, w)
    for (std::int64_t k = 0; k < K; ++k)
      for (std::int64_t j = 0; j < w; ++j) panel[k * w + j] = rows[static_cast<std::size_t>(j * K + k)];
  }
}

void unpack_column(float* out, const float* packed, std::int64_t K, std::int64_t N, std::int64_t n) {
  const std::int64_t col = n / kPanel * kPanel, w = std::min(kPanel, N - col);
  const float* panel = packed + col * K + (n - col);
  for (std::int64_t k = 0; k < K; ++k) out[k] = panel[k * w];
}

void linear_packed(float* out, const float* inp, const float* packed, const float* bias, std::int64_t T,
                   std::int64_t K, std::int64_t N, Epilogue epilogue) {
  const std::int64_t panels = (N + kPanel - 1) / kPanel;
  // At least ~256k multiply-adds per thread: below that, waking workers costs more than it saves.
  const std::int64_t min_panels = std::max<std::int64_t>(1, (1 << 18) / std::max<std::int64_t>(1, T * K * kPanel));
  const bool avx2 = active_isa() == Isa::avx2;
  parallel_for(panels, min_panels, [&](std::int64_t first, std::int64_t last) {
    const std::int64_t col = first * kPanel;
    const std::int64_t cols = std::min(N, last * kPanel) - col;
    float* c = out + col;
    const float* b = packed + col * K;
    const float* bs = bias ? bias + col : nullptr;
    if (avx2)
      avx2::gemm_panels(c, N, inp, K, b, kPanel, kPanel * K, true, T, cols, K, bs, epilogue);
    else
      portable::gemm_panels(c, N, inp, K, b, kPanel, kPanel * K, true, T, cols, K, bs, epilogue);
  });
}

void gemm_packed(float* out, std::int64_t ldo, const float* a, std::int64_t lda, const float* packed, std::int64_t M,
                 std::int64_t N, std::int64_t K) {
  if (active_isa() == Isa::avx2)
    avx2::gemm_panels(out, ldo, a, lda, packed, kPanel, kPanel * K, true, M, N, K, nullptr, Epilogue::store);
  else
    portable::gemm_panels(out, ldo, a, lda, packed, kPanel, kPanel * K, true, M, N, K, nullptr, Epilogue::store);
}

void gemm_view(float* out, std::int64_t ldo, const float* a, std::int64_t lda, const PanelView& b, std::int64_t M,
               std::int64_t N, std::int64_t K) {
  if (active_isa() == Isa::avx2)
    avx2::gemm_panels(out, ldo, a, lda, b.data, b.ldb, b.panel_stride, b.packed, M, N, K, nullptr, Epilogue::store);
  else
    portable::gemm_panels(out, ldo, a, lda, b.data, b.ldb, b.panel_stride, b.packed, M, N, K, nullptr,
                          Epilogue::store);
}

void gemm_nt(float* out, std::int64_t ldo, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
             std::int64_t M, std::int64_t N, std::int64_t K, float scale) {
  if (active_isa() == Isa::avx2)
    avx2::gemm_nt(out, ldo, a, lda, b, ldb, M, N, K, scale);
  else
    portable::gemm_nt(out, ldo, a, lda, b, ldb, M, N, K, scale);
}

void gemm_nn(float* out, std::int64_t ldo, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
             std::int64_t M, std::int64_t N, std::int64_t K) {
  // Unpacked: panel p is simply columns [16p, 16p + 16) of b.
  if (active_isa() == Isa::avx2)
    avx2::gemm_panels(out, ldo, a, lda, b, ldb, kPanel, false, M, N, K, nullptr, Epilogue::store);
  else
    portable::gemm_panels(out, ldo, a, lda, b, ldb, kPanel, false, M, N, K, nullptr, Epilogue::store);
}

}  // namespace kael::kernels
