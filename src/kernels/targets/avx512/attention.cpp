// AVX-512 attention of one head (kernel_table.hpp, AttendHeadFn), fused: the query rows go in
// tiles of up to 12, and each tile runs its three steps back to back on a buffer that stays in
// L1 (12 rows of scores, 24 KiB at 512 positions):
//   1. scores S = scale * Q K^T over the positions the tile's last row sees, read in place
//      from each block's key panels (16 positions a panel, one cache line per dimension),
//      12 broadcasts of the tile's packed queries per dimension;
//   2. per row, e = exp(S - max) over its own positions, zeros beyond, and 1 / sum(e);
//   3. O = (e V) / sum(e): the value rows of every block in turn, without copying them, while
//      the sums stay in registers.
// The scores are kept in groups of 16 positions, row r of a group at + 16 r, so step 3's
// broadcasts of a position's 12 probabilities come from one pointer with fixed offsets.
// Where the general two-product path (attention.cpp) computed a chunk's products with a call
// per block and gathered the values of several blocks into one buffer, this reads each block
// once per tile.
// Every output is computed the same way whatever the tile's row count: each score one FMA chain
// over the dimensions, each row's softmax over its own positions in groups of 16 from position
// 0, and each output one FMA chain over the positions 0 .. the tile's last (the zeros past a
// row's own add exactly nothing), times 1 / sum. So a prefill row equals a decode step bit for
// bit, whatever the block size or the thread split.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/targets/avx512/kernels.hpp"
#include "kernels/targets/avx512/vec.hpp"
#include "kernels/family/math.hpp"

namespace kael::kernels::avx512 {
namespace {

constexpr int kTileRows = 12;
// Value rows prefetched this many positions ahead (one cache line per panel and position).
constexpr long kAhead = 8;

// One head's cache as block tables: block b's K^T panels at keys[b] (panel j of the block,
// positions 16 j.., at + 16 j head_dim, row d at + 16 d) and its value panels at values[b]
// (panel p at + 16 p block_positions, position s of the block at + 16 s).
struct Head {
  const float* const* keys;
  const float* const* values;
  long block_positions;
  long head_dim;
  const float* key_panel(long g) const {  // positions 16 g .. 16 g + 15
    const long per_block = block_positions / 16;
    return keys[g / per_block] + (g % per_block) * 16 * head_dim;
  }
};

// Step 1 for NP groups of 16 positions from group g: s (groups of MR rows x 16, group p at
// + 16 MR p) = scale * qt (head_dim, MR; the tile's queries, a dimension's MR values together)
// times the keys. Meanwhile the next NP groups (those below `groups`) are pulled into L1, a
// cache line per group and dimension: a group's keys are only head_dim lines, too short a
// stream for the hardware prefetcher to get ahead of (without it the first loads of every
// group waited on L2, and the products ran at about half the GEMM's speed).
template <int MR, int NP>
void score_groups(float* s, const float* qt, const Head& head, long g, long groups, float scale) {
  const float* panel[NP];
  const float* next[NP];
  int prefetch = 0;
  for (int p = 0; p < NP; ++p) panel[p] = head.key_panel(g + p);
  for (int p = 0; p < NP && g + NP + p < groups; ++p) next[prefetch++] = head.key_panel(g + NP + p);
  __m512 acc[MR * NP];
#pragma GCC unroll 32
  for (int i = 0; i < MR * NP; ++i) acc[i] = _mm512_setzero_ps();
  for (long d = 0; d < head.head_dim; ++d) {
    __m512 row[NP];
#pragma GCC unroll 8
    for (int p = 0; p < NP; ++p) row[p] = _mm512_loadu_ps(panel[p] + 16 * d);
    for (int p = 0; p < prefetch; ++p) _mm_prefetch(reinterpret_cast<const char*>(next[p] + 16 * d), _MM_HINT_T0);
#pragma GCC unroll 12
    for (int r = 0; r < MR; ++r) {
      const __m512 x = _mm512_set1_ps(qt[d * MR + r]);
#pragma GCC unroll 8
      for (int p = 0; p < NP; ++p) acc[r * NP + p] = _mm512_fmadd_ps(x, row[p], acc[r * NP + p]);
    }
  }
  const __m512 vscale = _mm512_set1_ps(scale);
#pragma GCC unroll 32
  for (int i = 0; i < MR * NP; ++i)
    _mm512_storeu_ps(s + (i % NP) * 16 * MR + (i / NP) * 16, _mm512_mul_ps(acc[i], vscale));
}

// Step 2 for row r of the tile: its first n scores become e = exp(score - max), the rest of
// its `groups` groups zeros; returns 1 / sum(e). Lanes are positions mod 16 and groups go in
// order, so the sums are the same for any MR.
// (Flattened: GCC 12 warns about the intrinsics' undefined vectors inside an exp16 left out of line.)
template <int MR>
__attribute__((flatten)) float softmax_row(float* s, int r, long n, long groups) {
  const long full = n / 16;
  const __mmask16 tail = Vec::tail(n - 16 * full);
  const auto at = [&](long g) { return s + g * 16 * MR + r * 16; };
  __m512 vmax = _mm512_set1_ps(-__builtin_inff());
  for (long g = 0; g < full; ++g) vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(at(g)));
  if (tail) vmax = _mm512_mask_max_ps(vmax, tail, vmax, _mm512_maskz_loadu_ps(tail, at(full)));
  const __m512 shift = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
  __m512 vsum = _mm512_setzero_ps();
  for (long g = 0; g < full; ++g) {
    const __m512 e = family::exp_clamped<Vec>(_mm512_sub_ps(_mm512_loadu_ps(at(g)), shift));
    _mm512_storeu_ps(at(g), e);
    vsum = _mm512_add_ps(vsum, e);
  }
  long g = full;
  if (tail) {
    const __m512 e = _mm512_maskz_mov_ps(tail, family::exp_clamped<Vec>(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, at(full)), shift)));
    _mm512_storeu_ps(at(full), e);
    vsum = _mm512_add_ps(vsum, e);
    ++g;
  }
  for (; g < groups; ++g) _mm512_storeu_ps(at(g), _mm512_setzero_ps());
  return 1.0f / _mm512_reduce_add_ps(vsum);
}

// Step 3 for NP value panels from panel p0 (mask[p]: the valid lanes of each): out rows
// (MR, out_stride), columns 16 p0 .. = inv[r] * sum over positions s < seen of e[r][s] V[s].
template <int MR, int NP>
void weigh_values(float* out, long out_stride, const float* e, const float* inv, const Head& head, long p0,
                  const __mmask16* mask, long seen) {
  __m512 acc[MR * NP];
#pragma GCC unroll 32
  for (int i = 0; i < MR * NP; ++i) acc[i] = _mm512_setzero_ps();
  const long BP = head.block_positions;
  for (long b = 0; b * BP < seen; ++b) {
    // This block's panels, and the next block's (or this one's again) for the prefetches:
    // kAhead positions ahead, into the next block near the end of this one.
    const float* panel[NP];
    const float* next[NP];
    const long next_block = (b + 1) * BP < seen ? b + 1 : b;
    for (int p = 0; p < NP; ++p) {
      panel[p] = head.values[b] + (p0 + p) * 16 * BP;
      next[p] = head.values[next_block] + (p0 + p) * 16 * BP;
    }
    const long end = std::min(BP, seen - b * BP);
    for (long j0 = 0; j0 < end; j0 += 16) {
      const float* eg = e + (b * BP + j0) / 16 * 16 * MR;  // the group of positions b BP + j0 ..
      const long n = std::min<long>(16, end - j0);
      for (long j = 0; j < n; ++j) {
        __m512 row[NP];
#pragma GCC unroll 4
        for (int p = 0; p < NP; ++p) row[p] = _mm512_maskz_loadu_ps(mask[p], panel[p] + 16 * (j0 + j));
        const long ahead = j0 + j + kAhead;
#pragma GCC unroll 4
        for (int p = 0; p < NP; ++p)
          _mm_prefetch(reinterpret_cast<const char*>(ahead < BP ? panel[p] + 16 * ahead : next[p] + 16 * (ahead - BP)),
                       _MM_HINT_T0);
#pragma GCC unroll 12
        for (int r = 0; r < MR; ++r) {
          const __m512 x = _mm512_set1_ps(eg[r * 16 + j]);
#pragma GCC unroll 4
          for (int p = 0; p < NP; ++p) acc[r * NP + p] = _mm512_fmadd_ps(x, row[p], acc[r * NP + p]);
        }
      }
    }
  }
#pragma GCC unroll 32
  for (int i = 0; i < MR * NP; ++i) {
    const int r = i / NP, p = i % NP;
    _mm512_mask_storeu_ps(out + r * out_stride + 16 * (p0 + p), mask[p],
                          _mm512_mul_ps(acc[i], _mm512_set1_ps(inv[r])));
  }
}

// Per thread, grown to the longest context seen: the tile's scores and its packed queries.
struct Buffers {
  std::vector<float> scores, queries;
};

// One tile of MR query rows, the first at position pos (row r at pos + r).
template <int MR>
void attend_tile(float* out, long out_stride, const float* q, long q_stride, const Head& head, long pos,
                 Buffers& buffers) {
  const long D = head.head_dim, seen = pos + MR, groups = (seen + 15) / 16;
  if (buffers.scores.size() < static_cast<std::size_t>(groups * 16 * MR))
    buffers.scores.resize(static_cast<std::size_t>(groups * 16 * MR));
  if (buffers.queries.size() < static_cast<std::size_t>(D * MR)) buffers.queries.resize(static_cast<std::size_t>(D * MR));
  float* s = buffers.scores.data();
  float* qt = buffers.queries.data();
  for (long d = 0; d < D; ++d)
    for (int r = 0; r < MR; ++r) qt[d * MR + r] = q[r * q_stride + d];
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  // Wider groups of keys for few rows: more independent chains while each key is loaded.
  constexpr int kScoreGroups = MR <= 2 ? 8 : MR <= 6 ? 4 : 2;
  long g = 0;
  for (; g + kScoreGroups <= groups; g += kScoreGroups)
    score_groups<MR, kScoreGroups>(s + g * 16 * MR, qt, head, g, groups, scale);
  for (; g < groups; ++g) score_groups<MR, 1>(s + g * 16 * MR, qt, head, g, groups, scale);
  float inv[MR];
  for (int r = 0; r < MR; ++r) inv[r] = softmax_row<MR>(s, r, pos + r + 1, groups);
  const long panels = (D + 15) / 16;
  constexpr int kValuePanels = MR <= 6 ? 4 : 2;
  __mmask16 mask[kValuePanels];
  long p = 0;
  for (; p + kValuePanels <= panels; p += kValuePanels) {
    for (int i = 0; i < kValuePanels; ++i) mask[i] = Vec::tail(D - 16 * (p + i));
    weigh_values<MR, kValuePanels>(out, out_stride, s, inv, head, p, mask, seen);
  }
  for (; p < panels; ++p) {
    mask[0] = Vec::tail(D - 16 * p);
    weigh_values<MR, 1>(out, out_stride, s, inv, head, p, mask, seen);
  }
}

}  // namespace

void attend_head(float* out, std::int64_t out_stride, const float* q, std::int64_t q_stride,
                 const float* const* key_blocks, const float* const* value_blocks, std::int64_t block_positions,
                 std::int64_t T, std::int64_t pos0, std::int64_t head_dim) {
  thread_local Buffers buffers;
  const Head head{key_blocks, value_blocks, block_positions, head_dim};
  for (std::int64_t t0 = 0; t0 < T; t0 += kTileRows) {
    float* o = out + t0 * out_stride;
    const float* qr = q + t0 * q_stride;
    const long pos = pos0 + t0;
#define KAEL_TILE(n)                                                \
  case n:                                                           \
    attend_tile<n>(o, out_stride, qr, q_stride, head, pos, buffers); \
    break;
    switch (std::min<std::int64_t>(kTileRows, T - t0)) {
      KAEL_TILE(12) KAEL_TILE(11) KAEL_TILE(10) KAEL_TILE(9) KAEL_TILE(8) KAEL_TILE(7)
      KAEL_TILE(6) KAEL_TILE(5) KAEL_TILE(4) KAEL_TILE(3) KAEL_TILE(2) KAEL_TILE(1)
      default: break;
    }
#undef KAEL_TILE
  }
}

}  // namespace kael::kernels::avx512
