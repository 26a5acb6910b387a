// AVX-512 F32 GEMM on the 16-column panels of gemm.hpp: one zmm is one panel row. The
// micro-kernel keeps an MR x (16 NP) block of outputs in MR * NP zmm accumulators while it
// walks k: per k it loads NP panel rows and broadcasts one input per row (folded into the FMA
// as a memory operand), MR * NP FMAs. Shapes:
//   MR <= 12, NP = 2: 24 accumulators + 2 panel rows of the 32 registers, 14 loads per 24
//                     FMAs (prefill, batched decode; FMA-bound);
//   MR = 1, NP = 4 and MR = 2, NP = 4: 4-8 FMA chains over 4 panel streams (decode, bound by
//                     reading the weights).
// Prefill is blocked for the caches (blocked() below): rows in blocks whose inputs stay in
// L2 while every panel pair of the thread's share passes over them, k in blocks whose panel
// rows stay in L1 while every row tile of the row block passes over them (without them a panel
// pair's K rows, 96 KiB at K = 768, leave L1 before the next row tile comes). Each row block's
// inputs are first copied into tiles (pack_tiles): a k's 12 broadcasts then read 48 contiguous
// bytes through one pointer, where 12 rows lda apart need 12 pointers (more than the free
// registers), 12 prefetch streams, and at K = 3072 (12 KiB rows) fall in one L1 set. What these
// choices measured: docs/performance.md, "The F32 prefill: changes and what bounds it".
// Every output is a single FMA chain over k in order, then + bias, whatever MR, NP, the
// blocking or the thread split (a k-block resumes from the previous block's sums): equal bits
// to the AVX2 kernel and to itself at any T.
#include <immintrin.h>

#include <unistd.h>

#include <algorithm>
#include <vector>

#include "kernels/aligned_vector.hpp"
#include "kernels/avx512/kernels.hpp"
#include "kernels/avx512/math.hpp"

namespace kael::kernels::avx512 {
namespace {

constexpr int kMaxRows = 12;
// The k-block: 2 panels x 256 rows = 32 KiB of weights, in L1 (48 KiB on Golden Cove, 32 on
// Zen 4) beside a tile's 12 input rows of it (12 KiB).
constexpr long kKc = 256;
// Panels from which blocked() copies its inputs into tiles (pack_tiles).
constexpr long kPackPanels = 8;
// Inputs per row block (rows x K floats): three quarters of L2 (2 MiB on Golden Cove, 1 MiB on
// Zen 4), the rest for the weights streaming through. Each row block is one pass over the
// weights from memory, so blocks as large as L2 allows (at 1 MiB on Golden Cove a 256-row chunk
// at K = 3072 took four; docs/performance.md, "The measurements behind the code's constants").
long row_block_bytes() {
  static const long bytes = [] {
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);  // 0 or -1 where unknown
    return l2 >= (256L << 10) ? l2 / 4 * 3 : 1L << 20;
  }();
  return bytes;
}

// Where a tile's k range sits in its chain over k. A product with K above kKc runs in k-blocks:
// the sums of a block wait in `partial` (a tile's rows 32 floats apart) and the next block starts
// from them, so each output is still one FMA chain over k in order (a float stored and loaded
// back is the same float) and the bias and epilogue come once, after the last block.
struct Chain {
  float* partial = nullptr;  // null: one block covers all of k
  bool resume = false;       // start from `partial` instead of zero
  bool last = true;          // finish into c; otherwise store the sums to `partial`
};
constexpr long kPartialLd = 32;

// c (MR, 16 NP) for panels b, b + panel_stride, ...; `w` valid columns (MASKED: NP = 1 and
// w < 16; masked loads never touch memory past them). Input (r, k) is a[r * lda + k], or with
// PACKED a[k * MR + r] (pack_tiles below: the MR broadcasts of a k are one contiguous read).
// `next`, when not null, is a panel group of the same shape to pull towards the cache meanwhile,
// one 64-byte row per panel at each k with k % (spread.mask + 1) == spread.phase.
struct Spread {
  long mask = 0;   // tiles sharing the prefetch, less one (a power of two less one)
  long phase = 0;  // this tile's share: the rows k with k & mask == phase
};
template <int MR, int NP, bool MASKED, bool PACKED = false>
void tile(float* c, long ldc, const float* a, long lda, const float* b, long ldb, long panel_stride, long K,
          const float* bias, Epilogue epilogue, long w, const float* next, Chain chain = {}, Spread spread = {}) {
  static_assert(!MASKED || NP == 1);
  constexpr int kAcc = MR * NP;
  __m512 acc[kAcc];
  // (`partial` is tested too: resume and !last imply it, and a default Chain's null lets the
  // compiler drop these branches outright, where GCC 12 with -fsanitize otherwise warns that a
  // load from the null `partial` is out of bounds.)
  if (chain.resume && chain.partial != nullptr) {
#pragma GCC unroll 32
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_loadu_ps(chain.partial + (i / NP) * kPartialLd + 16 * (i % NP));
  } else {
#pragma GCC unroll 32
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_setzero_ps();
  }
  const __mmask16 mask = tail_mask(w);
  for (long k = 0; k < K; ++k) {
    __m512 row[NP];
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
      const float* bk = b + p * panel_stride + k * ldb;
      row[p] = MASKED ? _mm512_maskz_loadu_ps(mask, bk) : _mm512_loadu_ps(bk);
      if (next != nullptr && (k & spread.mask) == spread.phase)
        _mm_prefetch(reinterpret_cast<const char*>(next + p * panel_stride + k * ldb), _MM_HINT_T0);
    }
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512 x = _mm512_set1_ps(PACKED ? a[k * MR + r] : a[r * lda + k]);
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) acc[r * NP + p] = _mm512_fmadd_ps(x, row[p], acc[r * NP + p]);
    }
  }
  if (!chain.last && chain.partial != nullptr) {
#pragma GCC unroll 32
    for (int i = 0; i < kAcc; ++i) _mm512_storeu_ps(chain.partial + (i / NP) * kPartialLd + 16 * (i % NP), acc[i]);
    return;
  }
#pragma GCC unroll 32
  for (int i = 0; i < kAcc; ++i) {
    const int r = i / NP, col = 16 * (i % NP);
    finish(c + r * ldc + col, acc[i], bias ? bias + col : nullptr, epilogue, MASKED ? mask : tail_mask(16));
  }
}

// Rows [0, M) against one panel group over k [k0, k0 + K), in tiles of up to kMaxRows rows; the
// first (up to) 8 full tiles also prefetch `next`, each a share of its rows, or with no full tile
// the one short tile all of them. chain.partial, if any, holds M rows. PACKED: `a` holds the M
// rows as pack_tiles lays them out, lda = their full K. (Shares, not one tile prefetching all
// of `next`, 32 KiB of weights from L3 or memory within one tile's 256 k: docs/performance.md,
// "The F32 prefill: changes and what bounds it".)
template <int NP, bool MASKED, bool PACKED = false>
void rows_of(float* c, long ldc, const float* a, long lda, long k0, const float* b, long ldb, long panel_stride,
             long M, long K, const float* bias, Epilogue epilogue, long w, const float* next, Chain chain = {}) {
  const auto at_row = [&](long r) {
    Chain part = chain;
    if (part.partial != nullptr) part.partial += r * kPartialLd;
    return part;
  };
  // A tile of h rows from row r: its (K, h) block in the packed form, rows lda apart otherwise.
  const auto input = [&](long r, long h) { return PACKED ? a + r * lda + k0 * h : a + r * lda + k0; };
  const long full_tiles = M / kMaxRows;
  const long sharing = full_tiles >= 8 ? 8 : full_tiles >= 4 ? 4 : full_tiles >= 2 ? 2 : 1;
  long r = 0;
  for (long j = 0; j < full_tiles; ++j, r += kMaxRows)
    tile<kMaxRows, NP, MASKED, PACKED>(c + r * ldc, ldc, input(r, kMaxRows), lda, b, ldb, panel_stride, K, bias,
                                       epilogue, w, j < sharing ? next : nullptr, at_row(r), {sharing - 1, j});
  if (full_tiles > 0) next = nullptr;
  float* cr = c + r * ldc;
  const Chain cc = at_row(r);
#define KAEL_ROWS(n)                                                                                        \
  case n:                                                                                                   \
    tile<n, NP, MASKED, PACKED>(cr, ldc, input(r, n), lda, b, ldb, panel_stride, K, bias, epilogue, w, next, \
                                cc);                                                                        \
    break;
  switch (M - r) {
    KAEL_ROWS(11) KAEL_ROWS(10) KAEL_ROWS(9) KAEL_ROWS(8) KAEL_ROWS(7) KAEL_ROWS(6)
    KAEL_ROWS(5) KAEL_ROWS(4) KAEL_ROWS(3) KAEL_ROWS(2) KAEL_ROWS(1)
    default: break;
  }
#undef KAEL_ROWS
}

// dst = rows [0, M) of a (K columns, rows lda apart) in tiles of kMaxRows rows (the last one has
// h = the rest), tile i being (K, h) from dst + i * kMaxRows * K: what a PACKED tile reads.
// A full tile goes 4 rows x 4 k at a time through a 4x4 transpose in xmm registers (a scalar
// copy, 12 loads and 12 stores per k, took about 2% of a one-thread prefill, and each thread
// packs the whole block).
void pack_tiles(float* dst, const float* a, long lda, long M, long K) {
  for (long r0 = 0; r0 < M; r0 += kMaxRows) {
    const long h = std::min<long>(kMaxRows, M - r0);
    float* t = dst + r0 * K;
    const float* ar = a + r0 * lda;
    long k = 0;
    if (h == kMaxRows)
      for (; k + 4 <= K; k += 4)
        for (long g = 0; g < kMaxRows; g += 4) {
          __m128 r0v = _mm_loadu_ps(ar + g * lda + k), r1v = _mm_loadu_ps(ar + (g + 1) * lda + k);
          __m128 r2v = _mm_loadu_ps(ar + (g + 2) * lda + k), r3v = _mm_loadu_ps(ar + (g + 3) * lda + k);
          _MM_TRANSPOSE4_PS(r0v, r1v, r2v, r3v);  // r{i}v: rows g.. g + 3 at k + i
          _mm_storeu_ps(t + k * kMaxRows + g, r0v);
          _mm_storeu_ps(t + (k + 1) * kMaxRows + g, r1v);
          _mm_storeu_ps(t + (k + 2) * kMaxRows + g, r2v);
          _mm_storeu_ps(t + (k + 3) * kMaxRows + g, r3v);
        }
    for (; k < K; ++k)
      for (long r = 0; r < h; ++r) t[k * h + r] = ar[r * lda + k];
  }
}

// As pack_tiles, from a transposed a: input (r, k) at a[k * lda + r] (GemmPanelsAtFn). A tile's k
// is then h contiguous floats, so the tiles need no transposing (where kernels::gemm's rows copy
// of X^T and pack_tiles' transpose back took about a fifth of a dW product).
void pack_tiles_transposed(float* dst, const float* a, long lda, long M, long K) {
  for (long r0 = 0; r0 < M; r0 += kMaxRows) {
    const long h = std::min<long>(kMaxRows, M - r0);
    float* t = dst + r0 * K;
    for (long k = 0; k < K; ++k) std::copy_n(a + k * lda + r0, h, t + k * h);
  }
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
    rows_of<1, false>(c + 16 * p, ldc, a, lda, 0, b + p * panel_stride, ldb, panel_stride, M, K, bias_at(p),
                      epilogue, 16, nullptr);
}

// Full panels, three or more rows. Loop order, outermost first: row blocks whose inputs
// (rows x K) stay in L2 while every panel pair of the thread's share passes over them; panel
// pairs; k-blocks of kKc, whose 2 x kKc panel rows (32 KiB at 256) stay in L1 while every row
// tile of the block passes over them; row tiles.
// a_transposed: input (r, k) at a[k * lda + r], always packed.
void blocked(float* c, long ldc, const float* a, long lda, const float* b, long ldb, long panel_stride, long M,
             long K, const float* bias, Epilogue epilogue, long full_panels, bool a_transposed = false) {
  // As few row blocks as fit (each one streams all the thread's weights again), of equal size in
  // whole tiles: 256 rows at K = 3072 with 2 MiB of L2 are 96 + 96 + 64, not 120 + 120 + 16.
  const long most = std::max<long>(kMaxRows, row_block_bytes() / (4 * std::max<long>(1, K)) / kMaxRows * kMaxRows);
  const long blocks = (M + most - 1) / most;
  const long block = ((M + blocks - 1) / blocks + kMaxRows - 1) / kMaxRows * kMaxRows;
  const bool split = K > kKc;
  // Copying the inputs costs about one panel's worth of multiply-adds: worth it for the
  // model's products (24 or more panels per thread), not for attention's P V (4 panels).
  const bool pack = full_panels >= kPackPanels || a_transposed;
  thread_local AlignedVector<float> partial, tiles;  // on cache lines: partial's rows are zmm loads
  if (split && partial.size() < static_cast<std::size_t>(block * kPartialLd))
    partial.resize(static_cast<std::size_t>(block * kPartialLd));
  if (pack && tiles.size() < static_cast<std::size_t>(block * K)) tiles.resize(static_cast<std::size_t>(block * K));
  const auto bias_at = [&](long p) { return bias ? bias + 16 * p : nullptr; };
  for (long r0 = 0; r0 < M; r0 += block) {
    const long rows = std::min<long>(block, M - r0);
    float* cb = c + r0 * ldc;
    const float* ab = a + r0 * lda;  // (unused when a_transposed: pack is set)
    if (a_transposed)
      pack_tiles_transposed(tiles.data(), a + r0, lda, rows, K);
    else if (pack)
      pack_tiles(tiles.data(), ab, lda, rows, K);
    for (long p = 0; p < full_panels; p += 2) {
      const bool pair = p + 2 <= full_panels;
      for (long k0 = 0; k0 == 0 || k0 < K; k0 += kKc) {  // K = 0 too: the outputs are the bias
        const long kc = std::min(kKc, K - k0);
        const Chain chain{split ? partial.data() : nullptr, k0 > 0, k0 + kc == K};
        const float* bk = b + p * panel_stride + k0 * ldb;
        const float* next = k0 + kc < K ? bk + kc * ldb
                            : p + 4 <= full_panels ? b + (p + 2) * panel_stride
                                                   : nullptr;
        float* cp = cb + 16 * p;
        if (pair && pack)
          rows_of<2, false, true>(cp, ldc, tiles.data(), K, k0, bk, ldb, panel_stride, rows, kc, bias_at(p),
                                  epilogue, 16, next, chain);
        else if (pair)
          rows_of<2, false>(cp, ldc, ab, lda, k0, bk, ldb, panel_stride, rows, kc, bias_at(p), epilogue, 16, next,
                            chain);
        else if (pack)
          rows_of<1, false, true>(cp, ldc, tiles.data(), K, k0, bk, ldb, panel_stride, rows, kc, bias_at(p),
                                  epilogue, 16, nullptr, chain);
        else
          rows_of<1, false>(cp, ldc, ab, lda, k0, bk, ldb, panel_stride, rows, kc, bias_at(p), epilogue, 16,
                            nullptr, chain);
      }
    }
  }
}

}  // namespace

void gemm_panels(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                 std::int64_t panel_stride, bool packed, std::int64_t M, std::int64_t N, std::int64_t K,
                 const float* bias, Epilogue epilogue) {
  if (M <= 0 || N <= 0) return;
  const long full_panels = N / 16, w = N % 16;
  if (M <= 2)
    skinny(c, ldc, a, lda, b, ldb, panel_stride, M, K, bias, epilogue, full_panels);
  else
    blocked(c, ldc, a, lda, b, ldb, panel_stride, M, K, bias, epilogue, full_panels);
  if (w > 0) {
    const long p = full_panels;
    rows_of<1, true>(c + 16 * p, ldc, a, lda, 0, b + p * panel_stride, packed ? w : ldb, panel_stride, M, K,
                     bias ? bias + 16 * p : nullptr, epilogue, w, nullptr);
  }
}

void gemm_panels_at(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                    std::int64_t panel_stride, bool /*packed*/, std::int64_t M, std::int64_t N, std::int64_t K,
                    const float* bias, Epilogue epilogue) {
  if (M <= 0 || N <= 0) return;
  blocked(c, ldc, a, lda, b, ldb, panel_stride, M, K, bias, epilogue, N / 16, /*a_transposed=*/true);
}

}  // namespace kael::kernels::avx512
