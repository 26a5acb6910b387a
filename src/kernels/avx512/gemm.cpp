// AVX-512 F32 GEMM on the 16-column panels of gemm.hpp: one zmm is one panel row. The
// micro-kernel keeps an MR x (16 NP) block of outputs in MR * NP zmm accumulators while it
// walks k: per k it loads NP panel rows and broadcasts one input per row (folded into the FMA
// as a memory operand), MR * NP FMAs. Shapes:
//   MR <= 12, NP = 2: 24 accumulators + 2 panel rows of the 32 registers, 14 loads per 24
//                     FMAs (prefill, batched decode; FMA-bound);
//   MR = 1, NP = 4 and MR = 2, NP = 4: 4-8 FMA chains over 4 panel streams (decode, bound by
//                     reading the weights).
// Rows are taken in blocks whose inputs stay in L2 while every panel of the thread's share
// passes over them (at long T the inputs would otherwise stream from L3 once per panel pair).
// Every output is a single FMA chain over k in order, then + bias, whatever MR, NP, the
// blocking or the thread split: equal bits to the AVX2 kernel and to itself at any T.
#include <immintrin.h>

#include <algorithm>

#include "kernels/avx512/kernels.hpp"
#include "kernels/avx512/math.hpp"

namespace kael::kernels::avx512 {
namespace {

constexpr int kMaxRows = 12;

// c (MR, 16 NP) for panels b, b + panel_stride, ...; `w` valid columns (MASKED: NP = 1 and
// w < 16; masked loads never touch memory past them). `next`, when not null, is a panel group
// of the same shape to pull towards the cache meanwhile, one 64-byte row per panel and k.
template <int MR, int NP, bool MASKED>
void tile(float* c, long ldc, const float* a, long lda, const float* b, long ldb, long panel_stride, long K,
          const float* bias, Epilogue epilogue, long w, const float* next) {
  static_assert(!MASKED || NP == 1);
  constexpr int kAcc = MR * NP;
  __m512 acc[kAcc];
#pragma GCC unroll 32
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_setzero_ps();
  const __mmask16 mask = tail_mask(w);
  for (long k = 0; k < K; ++k) {
    __m512 row[NP];
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
      const float* bk = b + p * panel_stride + k * ldb;
      row[p] = MASKED ? _mm512_maskz_loadu_ps(mask, bk) : _mm512_loadu_ps(bk);
      if (next != nullptr) _mm_prefetch(reinterpret_cast<const char*>(next + p * panel_stride + k * ldb), _MM_HINT_T0);
    }
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512 x = _mm512_set1_ps(a[r * lda + k]);
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) acc[r * NP + p] = _mm512_fmadd_ps(x, row[p], acc[r * NP + p]);
    }
  }
#pragma GCC unroll 32
  for (int i = 0; i < kAcc; ++i) {
    const int r = i / NP, col = 16 * (i % NP);
    finish(c + r * ldc + col, acc[i], bias ? bias + col : nullptr, epilogue, MASKED ? mask : tail_mask(16));
  }
}

// Rows [0, M) against one panel group, in tiles of up to kMaxRows rows; the first tile also
// prefetches `next`.
template <int NP, bool MASKED>
void rows_of(float* c, long ldc, const float* a, long lda, const float* b, long ldb, long panel_stride, long M,
             long K, const float* bias, Epilogue epilogue, long w, const float* next) {
  long r = 0;
  for (; r + kMaxRows <= M; r += kMaxRows, next = nullptr)
    tile<kMaxRows, NP, MASKED>(c + r * ldc, ldc, a + r * lda, lda, b, ldb, panel_stride, K, bias, epilogue, w, next);
  float* cr = c + r * ldc;
  const float* ar = a + r * lda;
#define KAEL_ROWS(n) \
  case n: tile<n, NP, MASKED>(cr, ldc, ar, lda, b, ldb, panel_stride, K, bias, epilogue, w, next); break;
  switch (M - r) {
    KAEL_ROWS(11) KAEL_ROWS(10) KAEL_ROWS(9) KAEL_ROWS(8) KAEL_ROWS(7) KAEL_ROWS(6)
    KAEL_ROWS(5) KAEL_ROWS(4) KAEL_ROWS(3) KAEL_ROWS(2) KAEL_ROWS(1)
    default: break;
  }
#undef KAEL_ROWS
}

// Decode: one or two rows, four panels per pass so that enough loads are in flight.
void skinny(float* c, long ldc, const float* a, long lda, const float* b, long ldb, long panel_stride, long M,
            long K, const float* bias, Epilogue epilogue, long full_panels) {
  const auto bias_at = [&](long p) { return bias ? bias + 16 * p : nullptr; };
  long p = 0;
  for (; p + 4 <= full_panels; p += 4) {
    const float* next = p + 8 <= full_panels ? b + (p + 4) * panel_stride : nullptr;
    if (M == 2)
      tile<2, 4, false>(c + 16 * p, ldc, a, lda, b + p * panel_stride, ldb, panel_stride, K, bias_at(p), epilogue, 16,
                        next);
    else
      tile<1, 4, false>(c + 16 * p, ldc, a, lda, b + p * panel_stride, ldb, panel_stride, K, bias_at(p), epilogue, 16,
                        next);
  }
  for (; p < full_panels; ++p)
    rows_of<1, false>(c + 16 * p, ldc, a, lda, b + p * panel_stride, ldb, panel_stride, M, K, bias_at(p), epilogue,
                      16, nullptr);
}

}  // namespace

void gemm_panels(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                 std::int64_t panel_stride, bool packed, std::int64_t M, std::int64_t N, std::int64_t K,
                 const float* bias, Epilogue epilogue) {
  if (M <= 0 || N <= 0) return;
  const long full_panels = N / 16, w = N % 16;
  const auto bias_at = [&](long p) { return bias ? bias + 16 * p : nullptr; };
  if (M <= 2) {
    skinny(c, ldc, a, lda, b, ldb, panel_stride, M, K, bias, epilogue, full_panels);
  } else {
    // Row blocks of about 256 KiB of inputs (a multiple of the tile height).
    const long block = std::max<long>(kMaxRows, (1L << 18) / (4 * std::max<long>(1, K)) / kMaxRows * kMaxRows);
    for (long r0 = 0; r0 < M; r0 += block) {
      const long rows = std::min<long>(block, M - r0);
      float* cb = c + r0 * ldc;
      const float* ab = a + r0 * lda;
      long p = 0;
      for (; p + 2 <= full_panels; p += 2)
        rows_of<2, false>(cb + 16 * p, ldc, ab, lda, b + p * panel_stride, ldb, panel_stride, rows, K, bias_at(p),
                          epilogue, 16, p + 4 <= full_panels ? b + (p + 2) * panel_stride : nullptr);
      if (p < full_panels)
        rows_of<1, false>(cb + 16 * p, ldc, ab, lda, b + p * panel_stride, ldb, panel_stride, rows, K, bias_at(p),
                          epilogue, 16, nullptr);
    }
  }
  if (w > 0) {
    const long p = full_panels;
    rows_of<1, true>(c + 16 * p, ldc, a, lda, b + p * panel_stride, packed ? w : ldb, panel_stride, M, K, bias_at(p),
                     epilogue, w, nullptr);
  }
}

}  // namespace kael::kernels::avx512
