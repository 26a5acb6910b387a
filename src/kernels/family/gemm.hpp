// The F32 GEMM over the 16-column panels of gemm.hpp (the KernelTable entries gemm_panels,
// gemm_panels_at and gemm_nt) and the F16 product and panel conversion of quant.hpp (f16_gemm,
// dequantize_f16_panel: the same tiles, loading F16 panel rows), written once against a target's
// vector traits V and compiled in that target's units. One panel row is 16 / V::kLanes vectors
// (1 zmm, 2 ymm, 4 q registers).
// The micro-kernel (tile) keeps an MR x (16 NP) block of outputs in registers while it walks
// k: per k it loads NP panel rows and broadcasts one input per row, MR * NP * 16 / kLanes FMAs.
// Shapes:
//   MR <= V::kTileRows, NP = V::kTilePanels: the prefill tile, FMA-bound (12 x 2 panels on
//     AVX-512's 32 zmm, 6 x 1 on AVX2's 16 ymm and on NEON, whose q registers hold 4 floats);
//     for F16 weights V::kF16TileRows x V::kF16TilePanels (16 x 1 on AVX-512: TileShape);
//   MR = 1 or 2 with up to 4 panels (decode_panels): as many FMA chains and panel streams as
//     half the registers hold (decode, bound by reading the weights).
// Where the target's traits ask for it (kBlockForCaches), prefill is blocked for the caches
// (blocked() below): rows in blocks whose inputs stay in L2
// while every panel group of the thread's share passes over them, k in blocks whose panel rows
// stay in L1 while every row tile of the row block passes over them. Each row block's inputs
// are first copied into tiles (pack_tiles): a k's broadcasts then read contiguous bytes through
// one pointer, where 12 rows lda apart need 12 pointers, 12 prefetch streams, and at K = 3072
// (12 KiB rows) fall in one L1 set. What these choices measured: docs/performance.md, "The F32
// prefill: changes and what bounds it".
// Every output is a single FMA chain over k in order, then + bias, whatever MR, NP, the
// blocking, the thread split or the target (a k-block resumes from the previous block's sums):
// equal bits on every set, and for any row count.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/infra/aligned_vector.hpp"
#include "kernels/family/math.hpp"

namespace kael::kernels::family {

// The k-block: 2 panels x 256 rows = 32 KiB of weights, in L1 (48 KiB on Golden Cove, 32 on
// Zen 4) beside a tile's 12 input rows of it (12 KiB).
constexpr long kKc = 256;
// Panels from which blocked() copies its inputs into tiles (pack_tiles).
constexpr long kPackPanels = 8;
// A tile row's floats in `partial` (at most 2 panels of 16).
constexpr long kPartialLd = 32;

// Inputs per row block (rows x K floats): three quarters of L2 (2 MiB on Golden Cove, 1 MiB on
// Zen 4), the rest for the weights streaming through. Each row block is one pass over the
// weights from memory, so blocks as large as L2 allows (docs/performance.md, "The measurements
// behind the code's constants").
template <class V>
long row_block_bytes() {
  static const long bytes = [] {
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);  // 0 or -1 where unknown
    return l2 >= (256L << 10) ? l2 / 4 * 3 : 1L << 20;
  }();
  return bytes;
}

// The panels a decode tile of `rows` rows reads at once: the most of 4, 2, 1 whose accumulators
// fill at most half the registers.
template <class V>
constexpr int decode_panels(int rows) {
  constexpr int per_row = 16 / V::kLanes;
  for (int np = 4; np > 1; np /= 2)
    if (rows * np * per_row <= V::kRegisters / 2) return np;
  return 1;
}

// The prefill tile of W weights: V::kTileRows x V::kTilePanels for F32 panels,
// V::kF16TileRows x V::kF16TilePanels for F16 ones, whose conversion costs a vector op per panel
// row a tile reads: a taller tile of fewer panels converts each panel row for more rows.
template <class V, class W>
struct TileShape {
  static constexpr int kRows = V::kTileRows, kPanels = V::kTilePanels;
};
template <class V>
struct TileShape<V, std::uint16_t> {
  static constexpr int kRows = V::kF16TileRows, kPanels = V::kF16TilePanels;
};

// Where a tile's k range sits in its chain over k. A product with K above kKc runs in k-blocks:
// the sums of a block wait in `partial` (a tile's rows kPartialLd floats apart) and the next
// block starts from them, so each output is still one FMA chain over k in order (a float stored
// and loaded back is the same float) and the bias and epilogue come once, after the last block.
struct Chain {
  float* partial = nullptr;  // null: one block covers all of k
  bool resume = false;       // start from `partial` instead of zero
  bool last = true;          // finish into c; otherwise store the sums to `partial`
};

// Which k a tile prefetches `next` at: k % (mask + 1) == phase, so that tiles sharing a panel
// group each pull a share of it.
struct Spread {
  long mask = 0;     // tiles sharing the prefetch, less one (a power of two less one)
  long phase = 0;    // this tile's share
  bool l2 = false;   // pull `next` into L2 only
};

// The panel row vector at p: F32 weights, or F16 ones converted exactly (V::load_f16).
template <class V>
typename V::F load_weights(const float* p) {
  return V::load(p);
}
template <class V>
typename V::F load_weights(const std::uint16_t* p) {
  return V::load_f16(p);
}

// c (MR, 16 NP) for panels b, b + panel_stride, ... of F32 weights, or of F16 ones (W =
// std::uint16_t: converted in registers, so the same chain and the same bits as the F32 panels
// they convert to); `w` valid columns (MASKED, F32 only: NP = 1 and w < 16; tail loads never
// touch memory past them). Input (r, k) is a[r * lda + k], or with
// PACKED a[k * MR + r] (pack_tiles: the MR broadcasts of a k are one contiguous read). `next`,
// when not null, is a panel group of the same shape to pull towards the cache meanwhile, one
// 64-byte panel row per panel at each k of this tile's spread. Panel p's 16 outputs (and bias) are
// at c + p * c_panel_stride: 16, side by side, unless the panels read are not (skinny()).
template <class V, int MR, int NP, bool MASKED, bool PACKED = false, class W = float>
void tile(float* c, long ldc, const float* a, long lda, const W* b, long ldb, long panel_stride, long K,
          const float* bias, Epilogue epilogue, long w, const W* next, Chain chain = {}, Spread spread = {},
          long c_panel_stride = 16) {
  static_assert(!MASKED || (NP == 1 && sizeof(W) == 4));
  using F = typename V::F;
  constexpr int L = V::kLanes, kRow = NP * 16 / L, kAcc = MR * kRow;
  // A flat array with fully unrolled loops: GCC keeps it in registers (a nested array it
  // spilled to the stack on every k).
  F acc[kAcc];
  // (`partial` is tested too: resume and !last imply it, and a default Chain's null lets the
  // compiler drop these branches outright, where GCC 12 with -fsanitize otherwise warns that a
  // load from the null `partial` is out of bounds.)
  if (chain.resume && chain.partial != nullptr) {
#pragma GCC unroll 32
    for (int i = 0; i < kAcc; ++i) acc[i] = V::load(chain.partial + (i / kRow) * kPartialLd + L * (i % kRow));
  } else {
#pragma GCC unroll 32
    for (int i = 0; i < kAcc; ++i) acc[i] = V::zero();
  }
  typename V::Tail tails[kRow];
#pragma GCC unroll 4
  for (int j = 0; j < kRow; ++j) tails[j] = tail_from<V>(MASKED ? w : 16 * NP, L * j);
  for (long k = 0; k < K; ++k) {
    F row[kRow];
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
      const W* bk = b + p * panel_stride + k * ldb;
#pragma GCC unroll 4
      for (int j = 0; j < 16 / L; ++j) {
        if constexpr (MASKED)
          row[p * 16 / L + j] = V::load(bk + L * j, tails[j]);
        else
          row[p * 16 / L + j] = load_weights<V>(bk + L * j);
      }
      if (next != nullptr && (k & spread.mask) == spread.phase) {
        const float* line = reinterpret_cast<const float*>(next + p * panel_stride + k * ldb);
        spread.l2 ? V::prefetch_l2(line) : V::prefetch(line);
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const F x = V::set1(PACKED ? a[k * MR + r] : a[r * lda + k]);
#pragma GCC unroll 16
      for (int i = 0; i < kRow; ++i) acc[r * kRow + i] = V::fma(x, row[i], acc[r * kRow + i]);
    }
  }
  if (!chain.last && chain.partial != nullptr) {
#pragma GCC unroll 32
    for (int i = 0; i < kAcc; ++i) V::store(chain.partial + (i / kRow) * kPartialLd + L * (i % kRow), acc[i]);
    return;
  }
#pragma GCC unroll 32
  for (int i = 0; i < kAcc; ++i) {
    const int r = i / kRow, col = L * (i % kRow);
    if (MASKED && col >= w) continue;
    const long at = col / 16 * c_panel_stride + col % 16;
    finish<V, MASKED>(c + r * ldc + at, acc[i], bias ? bias + at : nullptr, epilogue, tails[i % kRow]);
  }
}

// The row tiles of M rows in tiles of at most `most` rows: as few as that allows, their heights
// differing by at most one, the taller first. A block of 16 rows in F32 on AVX-512 is two tiles
// of 8, where a 12-row tile and a 4-row one ran at 0.8 of the rate of 12 or 24 rows
// (docs/performance.md, "Batch-16 decode: even row tiles").
struct RowTiles {
  long count, base, taller;  // tiles, rows of the shorter ones, tiles with one row more

  RowTiles(long M, long most)
      : count((M + most - 1) / most), base(count > 0 ? M / count : 0), taller(count > 0 ? M % count : 0) {}
  long rows(long i) const { return base + (i < taller ? 1 : 0); }
  long start(long i) const { return i * base + std::min(i, taller); }
};

// A tile of h < H + 1 rows (h known only at run time): the tile of that height.
template <class V, int NP, bool MASKED, bool PACKED, int H, class... Args>
void short_tile(long h, Args... args) {
  if constexpr (H > 0) {
    if (h == H) return tile<V, H, NP, MASKED, PACKED>(args...);
    short_tile<V, NP, MASKED, PACKED, H - 1>(h, args...);
  }
}

// Rows [0, M) against one panel group over k [k0, k0 + K), in the tiles of RowTiles (of at most
// TileShape's rows); the first (up to) 8 tiles also prefetch `next`, each a share of its rows
// (without V::kBlockForCaches the first tile all of them), into L2 where fewer than 8 tiles read
// each k-block (into L1 the next block would evict the current one before the last tile reads
// it). chain.partial, if any, holds M rows. PACKED: `a` holds the M rows as pack_tiles lays them
// out, lda = their full K. (Shares, not one tile prefetching all of `next`: docs/performance.md,
// "The F32 prefill: changes and what bounds it".)
template <class V, int NP, bool MASKED, bool PACKED = false, class W = float>
void rows_of(float* c, long ldc, const float* a, long lda, long k0, const W* b, long ldb, long panel_stride,
             long M, long K, const float* bias, Epilogue epilogue, long w, const W* next, Chain chain = {}) {
  constexpr int kRows = TileShape<V, W>::kRows;
  const RowTiles tiles(M, kRows);
  const long sharing = !V::kBlockForCaches ? 1
                      : tiles.count >= 8   ? 8
                      : tiles.count >= 4   ? 4
                      : tiles.count >= 2   ? 2
                                           : 1;
  for (long j = 0; j < tiles.count; ++j) {
    const long r = tiles.start(j), h = tiles.rows(j);
    // The tile's rows: its (K, h) block in the packed form, rows lda apart otherwise.
    const float* input = PACKED ? a + r * lda + k0 * h : a + r * lda + k0;
    const W* pull = j < sharing ? next : nullptr;
    Chain part = chain;
    if (part.partial != nullptr) part.partial += r * kPartialLd;
    const Spread spread{sharing - 1, j, tiles.count < 8};
    if (h == kRows)
      tile<V, kRows, NP, MASKED, PACKED>(c + r * ldc, ldc, input, lda, b, ldb, panel_stride, K, bias, epilogue, w,
                                         pull, part, spread);
    else
      short_tile<V, NP, MASKED, PACKED, kRows - 1>(h, c + r * ldc, ldc, input, lda, b, ldb, panel_stride, K, bias,
                                                   epilogue, w, pull, part, spread);
  }
}

// dst = rows [0, M) of a (K columns, rows lda apart) in the tiles of RowTiles(M, most), the tile
// of h rows from row r being (K, h) at dst + r * K: what a PACKED tile reads. Rows go 4 rows x 4
// k at a time through V's 4x4 transposition (a scalar copy took about 2% of a one-thread
// prefill, and each thread packs the whole block).
template <class V>
void pack_tiles(float* dst, const float* a, long lda, long M, long K, long most) {
  const RowTiles tiles(M, most);
  for (long i = 0; i < tiles.count; ++i) {
    const long r0 = tiles.start(i), h = tiles.rows(i);
    float* t = dst + r0 * K;
    const float* ar = a + r0 * lda;
    long k = 0;
    for (; k + 4 <= K; k += 4) {
      long g = 0;
      for (; g + 4 <= h; g += 4) V::transpose4(t + k * h + g, h, ar + g * lda + k, lda);
      for (; g < h; ++g)
        for (long j = 0; j < 4; ++j) t[(k + j) * h + g] = ar[g * lda + k + j];
    }
    for (; k < K; ++k)
      for (long r = 0; r < h; ++r) t[k * h + r] = ar[r * lda + k];
  }
}

// The TransposePanelFn entry: one tile of w rows is exactly a panel of w columns of src^T.
template <class V>
void transpose_panel(float* panel, const float* src, std::int64_t ld, std::int64_t K, std::int64_t w) {
  pack_tiles<V>(panel, src, ld, w, K, w);
}

// As pack_tiles, from a transposed a: input (r, k) at a[k * lda + r] (GemmPanelsAtFn). A tile's k
// is then h contiguous floats, so the tiles need no transposing (where kernels::gemm's rows copy
// of X^T and pack_tiles' transpose back took about a fifth of a dW product).
// Each k's h floats go through masked vector loads and stores: std::copy_n called memmove for
// each (48 bytes at a time; about 5% of an LSTM language model's step, its decoder's dW). `most`
// is a tile's rows (TileShape), so h fits in kMostVectors vectors.
template <class V>
void pack_tiles_transposed(float* dst, const float* a, long lda, long M, long K, long most) {
  constexpr long L = V::kLanes, kMostVectors = (std::max(V::kTileRows, V::kF16TileRows) + L - 1) / L;
  const RowTiles tiles(M, most);
  for (long i = 0; i < tiles.count; ++i) {
    const long r0 = tiles.start(i), h = tiles.rows(i), vectors = (h + L - 1) / L;
    float* t = dst + r0 * K;
    typename V::Tail tails[kMostVectors] = {};
    for (long j = 0; j < vectors; ++j) tails[j] = tail_from<V>(h, L * j);
    for (long k = 0; k < K; ++k) {
      const float* from = a + k * lda + r0;
      float* to = t + k * h;
      for (long j = 0; j < vectors; ++j) V::store(to + L * j, V::load(from + L * j, tails[j]), tails[j]);
    }
  }
}

// Decode: one or two rows, decode_panels panels per pass so that enough loads are in flight
// (F16 panels: V::kF16TwoRowPanels for two rows). No software prefetch: the panels are sequential
// streams the hardware prefetchers follow, and prefetching the next pass's panels made a Zen 4's
// decode 10-30% slower (docs/performance.md, "Decode against the bandwidth on a Zen 4").
// Packed panels (each K x 16 in one block, the next right after it) are read by a pass `spacing`
// panels apart, not side by side: each of the pass's streams then runs on into the next pass's
// panel, where side-by-side panels made every pass start fresh streams only a panel long
// (24 KB in F16 at K = 768), each paying the prefetchers' ramp (docs/performance.md,
// "Decode: panel streams that run on").
template <class V, class W = float>
void skinny(float* c, long ldc, const float* a, long lda, const W* b, long ldb, long panel_stride, long M,
            long K, const float* bias, Epilogue epilogue, long full_panels) {
  const auto bias_at = [&](long p) { return bias ? bias + 16 * p : nullptr; };
  constexpr long one = decode_panels<V>(1);
  constexpr long two = std::is_same_v<W, std::uint16_t> ? V::kF16TwoRowPanels : decode_panels<V>(2);
  const long group = M == 2 ? two : one;
  const long passes = full_panels / group;
  const long spacing = ldb == 16 && panel_stride == 16 * K ? passes : 1;
  const W* none = nullptr;
  for (long pass = 0; pass < passes; ++pass) {
    const long p = spacing == 1 ? pass * group : pass;
    if (M == 2)
      tile<V, 2, two, false>(c + 16 * p, ldc, a, lda, b + p * panel_stride, ldb, spacing * panel_stride, K,
                             bias_at(p), epilogue, 16, none, Chain{}, Spread{}, 16 * spacing);
    else
      tile<V, 1, one, false>(c + 16 * p, ldc, a, lda, b + p * panel_stride, ldb, spacing * panel_stride, K,
                             bias_at(p), epilogue, 16, none, Chain{}, Spread{}, 16 * spacing);
  }
  for (long p = passes * group; p < full_panels; ++p)
    rows_of<V, 1, false, false, W>(c + 16 * p, ldc, a, lda, 0, b + p * panel_stride, ldb, panel_stride, M, K,
                                   bias_at(p), epilogue, 16, nullptr);
}

// Full panels, three or more rows. Loop order, outermost first: row blocks whose inputs
// (rows x K) stay in L2 while every panel group of the thread's share passes over them; panel
// groups of kTilePanels; k-blocks of kKc, whose panel rows stay in L1 while every row tile of
// the block passes over them; row tiles. Without V::kBlockForCaches, one k-block and no packed
// tiles (each tile reads its rows in place). a_transposed: input (r, k) at a[k * lda + r],
// always packed; its last panel may then be partial, tail_w < 16 valid columns (rows tail_ldb
// apart) after the full ones, run from the same packed tiles (F32 panels only).
template <class V, class W = float>
void blocked(float* c, long ldc, const float* a, long lda, const W* b, long ldb, long panel_stride, long M,
             long K, const float* bias, Epilogue epilogue, long full_panels, bool a_transposed, long tail_w = 0,
             long tail_ldb = 0) {
  constexpr long kRows = TileShape<V, W>::kRows, kGroup = TileShape<V, W>::kPanels;
  // As few row blocks as fit (each one streams all the thread's weights again), of equal size in
  // whole tiles: 256 rows at K = 3072 with 2 MiB of L2 are 96 + 96 + 64, not 120 + 120 + 16.
  const long most = std::max<long>(kRows, row_block_bytes<V>() / (4 * std::max<long>(1, K)) / kRows * kRows);
  const long blocks = (M + most - 1) / most;
  const long block = ((M + blocks - 1) / blocks + kRows - 1) / kRows * kRows;
  const bool split = V::kBlockForCaches && K > kKc;
  const long k_block = split ? kKc : std::max<long>(K, 1);
  // Copying the inputs costs about one panel's worth of multiply-adds: worth it for the
  // model's products (24 or more panels per thread), not for attention's P V (4 panels).
  const bool pack = (V::kBlockForCaches && full_panels >= kPackPanels) || a_transposed;
  thread_local AlignedVector<float> partial, tiles;  // on cache lines: partial's rows are vector loads
  if (split && partial.size() < static_cast<std::size_t>(block * kPartialLd))
    partial.resize(static_cast<std::size_t>(block * kPartialLd));
  if (pack && tiles.size() < static_cast<std::size_t>(block * K)) tiles.resize(static_cast<std::size_t>(block * K));
  const auto bias_at = [&](long p) { return bias ? bias + 16 * p : nullptr; };
  for (long r0 = 0; r0 < M; r0 += block) {
    const long rows = std::min<long>(block, M - r0);
    float* cb = c + r0 * ldc;
    const float* ab = a + r0 * lda;  // (unused when a_transposed: pack is set)
    if (a_transposed)
      pack_tiles_transposed<V>(tiles.data(), a + r0, lda, rows, K, kRows);
    else if (pack)
      pack_tiles<V>(tiles.data(), ab, lda, rows, K, kRows);
    for (long p = 0; p < full_panels; p += kGroup) {
      const bool whole = p + kGroup <= full_panels;
      for (long k0 = 0; k0 == 0 || k0 < K; k0 += k_block) {  // K = 0 too: the outputs are the bias
        const long kc = std::min(k_block, K - k0);
        const Chain chain{split ? partial.data() : nullptr, k0 > 0, k0 + kc == K};
        const W* bk = b + p * panel_stride + k0 * ldb;
        const W* next = k0 + kc < K                      ? bk + kc * ldb
                            : p + 2 * kGroup <= full_panels ? b + (p + kGroup) * panel_stride
                                                             : nullptr;
        float* cp = cb + 16 * p;
        if (whole && pack)
          rows_of<V, kGroup, false, true, W>(cp, ldc, tiles.data(), K, k0, bk, ldb, panel_stride, rows, kc, bias_at(p),
                                          epilogue, 16, next, chain);
        else if (whole)
          rows_of<V, kGroup, false, false, W>(cp, ldc, ab, lda, k0, bk, ldb, panel_stride, rows, kc, bias_at(p), epilogue, 16,
                                    next, chain);
        else if (pack)
          rows_of<V, 1, false, true, W>(cp, ldc, tiles.data(), K, k0, bk, ldb, panel_stride, rows, kc, bias_at(p),
                                     epilogue, 16, nullptr, chain);
        else
          rows_of<V, 1, false, false, W>(cp, ldc, ab, lda, k0, bk, ldb, panel_stride, rows, kc, bias_at(p), epilogue, 16,
                               nullptr, chain);
      }
    }
    if constexpr (std::is_same_v<W, float>) {
      if (tail_w > 0)  // one chain over all of K, as gemm_panels' tail
        rows_of<V, 1, true, true, W>(cb + 16 * full_panels, ldc, tiles.data(), K, 0, b + full_panels * panel_stride,
                                     tail_ldb, panel_stride, rows, K, bias_at(full_panels), epilogue, tail_w, nullptr);
    }
  }
}

// The GemmPanelsFn entry.
template <class V>
void gemm_panels(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                 std::int64_t panel_stride, bool packed, std::int64_t M, std::int64_t N, std::int64_t K,
                 const float* bias, Epilogue epilogue) {
  if (M <= 0 || N <= 0) return;
  const long full_panels = N / 16, w = N % 16;
  if (M <= 2)
    skinny<V>(c, ldc, a, lda, b, ldb, panel_stride, M, K, bias, epilogue, full_panels);
  else
    blocked<V>(c, ldc, a, lda, b, ldb, panel_stride, M, K, bias, epilogue, full_panels, false);
  if (w > 0) {
    const long p = full_panels;
    rows_of<V, 1, true, false, float>(c + 16 * p, ldc, a, lda, 0, b + p * panel_stride, packed ? w : ldb,
                                      panel_stride, M, K, bias ? bias + 16 * p : nullptr, epilogue, w, nullptr);
  }
}

// The GemmPanelsAtFn entry (M >= 3): a partial last panel is read from the packed tiles too, as
// a packed panel of its own width or in place.
template <class V>
void gemm_panels_at(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const float* b,
                    std::int64_t ldb, std::int64_t panel_stride, bool packed, std::int64_t M, std::int64_t N,
                    std::int64_t K, const float* bias, Epilogue epilogue) {
  if (M <= 0 || N <= 0) return;
  const long w = N % 16;
  blocked<V>(c, ldc, a, lda, b, ldb, panel_stride, M, K, bias, epilogue, N / 16, /*a_transposed=*/true, w,
             packed ? w : ldb);
}

// The F16GemmFn entry: full F16 panels (16 K elements each) converted in registers as the tiles
// read them, so no F32 copy of the weights is written: 1-2 rows (decode) through skinny(), more
// rows through blocked(), as the F32 panels go. Equal bits to dequantize_f16_panel + gemm_panels.
template <class V>
void f16_gemm(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const std::uint16_t* b, std::int64_t M,
              std::int64_t panels, std::int64_t K, const float* bias, Epilogue epilogue) {
  if (M <= 0 || panels <= 0) return;
  if (M <= 2) return skinny<V, std::uint16_t>(c, ldc, a, lda, b, 16, 16 * K, M, K, bias, epilogue, panels);
  blocked<V, std::uint16_t>(c, ldc, a, lda, b, 16, 16 * K, M, K, bias, epilogue, panels, false);
}

// The DequantizeF16Fn entry: dst (K, w) F32 = the F16 panel (K, w), exactly.
template <class V>
void dequantize_f16_panel(float* dst, const std::uint16_t* h, std::int64_t K, std::int64_t w) {
  constexpr long L = V::kLanes;
  const std::int64_t n = K * w;
  std::int64_t i = 0;
  for (; i + L <= n; i += L) V::store(dst + i, V::load_f16(h + i));
  if (i < n) {  // the ragged end through a zero-padded copy: h may end there
    std::uint16_t tail[L] = {};
    std::copy_n(h + i, n - i, tail);
    V::store(dst + i, V::load_f16(tail), V::tail(n - i));
  }
}

// One MR x NR block of gemm_nt's dot products: a rows against b rows, a vector of k per pair,
// the ragged end of K through tail loads, each pair's lanes added by V::hsum.
template <class V, int MR, int NR>
void nt_tile(float* out, long ldo, const float* a, long lda, const float* b, long ldb, long K, float scale) {
  using F = typename V::F;
  constexpr long L = V::kLanes;
  F acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = V::zero();
  const auto step = [&](long k, auto load) {
    F bv[NR];
    for (int j = 0; j < NR; ++j) bv[j] = load(b + j * ldb + k);
    for (int i = 0; i < MR; ++i) {
      const F av = load(a + i * lda + k);
      for (int j = 0; j < NR; ++j) acc[i][j] = V::fma(av, bv[j], acc[i][j]);
    }
  };
  long k = 0;
  for (; k + L <= K; k += L) step(k, [](const float* p) { return V::load(p); });
  if (k < K) {
    const auto tail = V::tail(K - k);
    step(k, [tail](const float* p) { return V::load(p, tail); });
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) out[i * ldo + j] = V::hsum(acc[i][j]) * scale;
}

// nt_tile<MR, NR> for NR = n < 4 known only at run time.
template <class V, int MR, int NR = 3, class... Args>
void nt_short(long n, Args... args) {
  if constexpr (NR > 0) {
    if (n == NR) return nt_tile<V, MR, NR>(args...);
    nt_short<V, MR, NR - 1>(n, args...);
  }
}

template <class V, int MR>
void nt_rows(float* out, long ldo, const float* a, long lda, const float* b, long ldb, long N, long K, float scale) {
  long j = 0;
  for (; j + 4 <= N; j += 4) nt_tile<V, MR, 4>(out + j, ldo, a, lda, b + j * ldb, ldb, K, scale);
  nt_short<V, MR>(N - j, out + j, ldo, a, lda, b + j * ldb, ldb, K, scale);
}

template <class V, int MR = V::kNtRows>
void nt_rows_short(long m, float* out, long ldo, const float* a, long lda, const float* b, long ldb, long N, long K,
                   float scale) {
  if constexpr (MR > 0) {
    if (m == MR) return nt_rows<V, MR>(out, ldo, a, lda, b, ldb, N, K, scale);
    nt_rows_short<V, MR - 1>(m, out, ldo, a, lda, b, ldb, N, K, scale);
  }
}

// The GemmNtFn entry: rows of a in V::kNtRows.
template <class V>
void gemm_nt(float* out, std::int64_t ldo, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
             std::int64_t M, std::int64_t N, std::int64_t K, float scale) {
  constexpr long kRows = V::kNtRows;
  long i = 0;
  for (; i + kRows <= M; i += kRows)
    nt_rows<V, kRows>(out + i * ldo, ldo, a + i * lda, lda, b, ldb, N, K, scale);
  if (i < M) nt_rows_short<V, kRows - 1>(M - i, out + i * ldo, ldo, a + i * lda, lda, b, ldb, N, K, scale);
}

}  // namespace kael::kernels::family
