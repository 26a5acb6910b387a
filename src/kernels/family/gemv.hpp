// The GemvRowsFn entry (kernel_table.hpp): one input row against a weight in torch's (out, in)
// row-major layout, read in place. kernels::gemm would otherwise pack the whole transposed weight
// for a single row (a scalar transposition of every weight, then a second read of the copy),
// which made a batch-1 tensor `linear` several times slower than the engine's decode.
// Here each group of panels (16 rows of w each) is transposed a k-block at a time, by V's 16x16
// transposition in registers where it has one (AVX-512), else by its 4x4 one, into a buffer in
// L2, and the decode tile of family/gemm.hpp runs on it, resuming its sums
// from block to block (Chain): every output is the same single FMA chain over k in order as
// gemm_panels computes, so the result has the same bits as the packed product.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/family/gemm.hpp"

namespace kael::kernels::family {

// k per transposed block: a group of 4 panels is then 64 KiB (in L2). Each block reads a run of
// 1 KiB from each row; runs of 256 bytes (64) streamed at half the rate on a Zen 4.
constexpr long kGemvBlock = 256;

// GCC 12 claims an out-of-bounds iteration in the ragged-row loop below for the instantiations
// where that loop cannot run (rows a multiple of 4): a false positive of its loop analysis.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Waggressive-loop-optimizations"
// Panel q (rows 16 q .. of w, at most `rows` of them) of the k range [k0, k0 + kc), as a
// (kc, 16) panel at dst + q * 16 * kGemvBlock.
template <class V>
void transpose_block(float* dst, const float* w, long ldw, long rows, long k0, long kc, const float* next,
                     long next_rows, long next_kc) {
  for (long r0 = 0; r0 < rows; r0 += 16) {
    float* panel = dst + r0 * kGemvBlock;
    const float* src = w + r0 * ldw + k0;
    const long h = std::min<long>(16, rows - r0);
    long g = 0;
    if constexpr (requires { V::transpose16(panel, 16L, src, ldw); }) {
      if (h == 16) {  // whole panels 16 k at a time in registers; the ragged end of k below
        long k = 0;
        for (; k + 16 <= kc; k += 16) {
          for (long j = 0; j < 16; ++j) {
            if (next != nullptr && k < next_kc && r0 + j < next_rows) V::prefetch_l2(next + (r0 + j) * ldw + k);
            if (k + 64 < kc) V::prefetch(src + j * ldw + k + 64);
          }
          V::transpose16(panel + k * 16, 16, src + k, ldw);
        }
        for (; k < kc; ++k)
          for (long j = 0; j < 16; ++j) panel[k * 16 + j] = src[j * ldw + k];
        g = 16;
      }
    }
    for (; g + 4 <= h; g += 4) {
      long k = 0;
      for (; k + 4 <= kc; k += 4) {
        if (next != nullptr && k % 16 == 0 && k < next_kc)  // a 64-byte line of each of the 4 rows
          for (long j = g; j < std::min(g + 4, next_rows - r0); ++j) V::prefetch_l2(next + (r0 + j) * ldw + k);
        if (k % 16 == 0 && k + 64 < kc)
          for (long j = g; j < g + 4; ++j) V::prefetch(src + j * ldw + k + 64);
        V::transpose4(panel + k * 16 + g, 16, src + g * ldw + k, ldw);
      }
      for (; k < kc; ++k)
        for (long j = g; j < g + 4; ++j) panel[k * 16 + j] = src[j * ldw + k];
    }
    for (; g < h; ++g) {  // the rows past the last 4 (a ragged last panel)
      const float* row = src + g * ldw;
      float* column = panel + g;
      for (long k = 0; k < kc; ++k, column += 16) *column = row[k];
    }
  }
}
#pragma GCC diagnostic pop

// out (16 NP columns, or `width` < 16 with MASKED) for rows [0, 16 NP) of w.
template <class V, int NP, bool MASKED>
void gemv_group(float* out, const float* x, const float* w, long ldw, long K, const float* bias, Epilogue epilogue,
                long width, float* panels, float* partial, long next_rows) {
  const long rows = MASKED ? width : 16 * NP;
  for (long k0 = 0; k0 == 0 || k0 < K; k0 += kGemvBlock) {  // K = 0 too: the outputs are the bias
    const long kc = std::min(kGemvBlock, K - k0);
    // The rows' next k-block, or the next group's first one, pulled towards L2 meanwhile: each
    // block reads only a short run of every row, too short for the hardware prefetchers.
    const bool more_k = k0 + kc < K;
    const float* next = more_k ? w + k0 + kc : next_rows > 0 ? w + rows * ldw : nullptr;
    transpose_block<V>(panels, w, ldw, rows, k0, kc, next, more_k ? rows : next_rows,
                       more_k ? std::min(kGemvBlock, K - k0 - kc) : std::min(kGemvBlock, K));
    const Chain chain{partial, k0 > 0, k0 + kc >= K};
    tile<V, 1, NP, MASKED>(out, 0, x + k0, 0, panels, 16, 16 * kGemvBlock, kc, bias, epilogue, MASKED ? width : 16,
                           static_cast<const float*>(nullptr), chain);
  }
}

// The GemvRowsFn entry: groups of decode_panels(1) panels, as skinny() reads packed ones.
template <class V>
void gemv_rows(float* out, const float* x, const float* w, std::int64_t ldw, std::int64_t N, std::int64_t K,
               const float* bias, Epilogue epilogue) {
  if (N <= 0) return;
  constexpr long kGroup = decode_panels<V>(1);
  alignas(64) float panels[kGroup * 16 * kGemvBlock];
  alignas(64) float partial[kGroup * 16];
  const auto bias_at = [&](long p) { return bias ? bias + 16 * p : nullptr; };
  const long full = N / 16, rest = N % 16;
  long p = 0;
  for (; p + kGroup <= full; p += kGroup)
    gemv_group<V, kGroup, false>(out + 16 * p, x, w + 16 * p * ldw, ldw, K, bias_at(p), epilogue, 16, panels, partial,
                                 std::min<long>(16 * kGroup, N - 16 * (p + kGroup)));
  for (; p < full; ++p)
    gemv_group<V, 1, false>(out + 16 * p, x, w + 16 * p * ldw, ldw, K, bias_at(p), epilogue, 16, panels, partial,
                            std::min<long>(16, N - 16 * (p + 1)));
  if (rest > 0)
    gemv_group<V, 1, true>(out + 16 * p, x, w + 16 * p * ldw, ldw, K, bias_at(p), epilogue, rest, panels, partial, 0);
}

}  // namespace kael::kernels::family
