// Attention of one head (kernel_table.hpp, AttendHeadFn), fused, written once over a target's
// traits V: the query rows go in tiles of up to V::kTileRows, and each tile runs its three steps
// back to back on a buffer that stays in L1 (12 rows of scores are 24 KiB at 512 positions):
//   1. scores S = scale * Q K^T over the positions the tile's last row sees, read in place
//      from each block's key panels (16 positions a panel, one cache line per dimension),
//      broadcasts of the tile's packed queries per dimension;
//   2. per row, e = exp(S - max) over its own positions, zeros beyond, and 1 / sum(e);
//   3. O = (e V) / sum(e): the value rows of every block in turn, without copying them, while
//      the sums stay in registers.
// A group of 16 positions (a key panel's width, a value panel's) is 16 / V::kLanes vectors.
// The scores are kept in groups of 16 positions, row r of a group at + 16 r, so step 3's
// broadcasts of a position's probabilities come from one pointer with fixed offsets. Where the
// general two-product path (attention.cpp) computes a chunk's products with a call per block
// and gathers the values of several blocks into one buffer, this reads each block once per tile.
// Every output is computed the same way whatever the tile's row count: each score one FMA chain
// over the dimensions, each row's softmax over its own positions in groups of 16 from position
// 0, and each output one FMA chain over the positions 0 .. the tile's last (the zeros past a
// row's own add exactly nothing), times 1 / sum. So a prefill row equals a decode step bit for
// bit, whatever the block size or the thread split.
#pragma once

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/family/math.hpp"

namespace kael::kernels::family::attention {

constexpr long kGroup = 16;  // positions per key panel; floats per value panel row
// Value rows prefetched this many positions ahead (one cache line per panel and position).
constexpr long kAhead = 8;

// Vectors per group of 16; and `avx512_count` (groups or panels a tile takes at once on
// AVX-512's 32 registers of 16 lanes) scaled to V, so that a tile's accumulators fill about as
// much of V's registers.
template <class V>
constexpr int kVecs = static_cast<int>(kGroup) / V::kLanes;
template <class V>
constexpr int scaled(int avx512_count) {
  const int n = avx512_count * V::kRegisters / 32 / kVecs<V>;
  return n < 1 ? 1 : n;
}

// One head's cache as block tables: block b's K^T panels at keys[b] (panel j of the block,
// positions 16 j.., at + 16 j head_dim, row d at + 16 d) and its value panels at values[b]
// (panel p at + 16 p block_positions, position s of the block at + 16 s).
// (A table may serve several heads side by side in each block: this head's data are
// `offset` floats past each block's pointer.)
struct Head {
  const float* const* keys;
  const float* const* values;
  long block_positions;
  long head_dim;
  long offset = 0;
  const float* key_panel(long g) const {  // positions 16 g .. 16 g + 15
    const long per_block = block_positions / kGroup;
    return keys[g / per_block] + offset + (g % per_block) * kGroup * head_dim;
  }
  const float* value_block(long b) const { return values[b] + offset; }
};

// Step 1 for NP groups of 16 positions from group g: s (groups of MR rows x 16, group p at
// + 16 MR p) = scale * qt (head_dim, MR; the tile's queries, a dimension's MR values together)
// times the keys. Meanwhile the next NP groups (those below `groups`) are pulled into L1, a
// cache line per group and dimension: a group's keys are only head_dim lines, too short a
// stream for the hardware prefetcher to get ahead of (without it the first loads of every
// group waited on L2, and the products ran at about half the GEMM's speed).
template <class V, int MR, int NP>
void score_groups(float* s, const float* qt, const Head& head, long g, long groups, float scale) {
  using F = typename V::F;
  constexpr int W = kVecs<V>;
  const float* panel[NP];
  const float* next[NP];
  int prefetch = 0;
  for (int p = 0; p < NP; ++p) panel[p] = head.key_panel(g + p);
  for (int p = 0; p < NP && g + NP + p < groups; ++p) next[prefetch++] = head.key_panel(g + NP + p);
  F acc[MR * NP * W];
#pragma GCC unroll 32
  for (int i = 0; i < MR * NP * W; ++i) acc[i] = V::zero();
  for (long d = 0; d < head.head_dim; ++d) {
    F row[NP * W];
#pragma GCC unroll 8
    for (int i = 0; i < NP * W; ++i) row[i] = V::load(panel[i / W] + kGroup * d + (i % W) * V::kLanes);
    for (int p = 0; p < prefetch; ++p) V::prefetch(next[p] + kGroup * d);
#pragma GCC unroll 12
    for (int r = 0; r < MR; ++r) {
      const F x = V::set1(qt[d * MR + r]);
#pragma GCC unroll 8
      for (int i = 0; i < NP * W; ++i) acc[r * NP * W + i] = V::fma(x, row[i], acc[r * NP * W + i]);
    }
  }
  const F vscale = V::set1(scale);
#pragma GCC unroll 32
  for (int i = 0; i < MR * NP * W; ++i) {
    const int r = i / (NP * W), p = i % (NP * W) / W, v = i % W;
    V::store(s + p * kGroup * MR + r * kGroup + v * V::kLanes, V::mul(acc[i], vscale));
  }
}

// Step 2 for row r of the tile: its first n scores become e = exp(score - max), the rest of
// its `groups` groups zeros; returns 1 / sum(e). Lanes are positions mod V::kLanes and groups go
// in order, so the sums are the same for any MR.
template <class V, int MR>
float softmax_row(float* s, int r, long n, long groups) {
  using F = typename V::F;
  constexpr int W = kVecs<V>;
  const long full = n / kGroup, rest = n - kGroup * full;
  const auto at = [&](long g, int v) { return s + g * kGroup * MR + r * kGroup + v * V::kLanes; };
  F vmax = V::set1(-__builtin_inff());
  for (long g = 0; g < full; ++g)
    for (int v = 0; v < W; ++v) vmax = V::max(vmax, V::load(at(g, v)));
  float shift = V::hmax(vmax);  // the maximum is exact in any order
  for (long j = 0; j < rest; ++j) shift = std::max(shift, at(full, 0)[j]);
  const F vshift = V::set1(shift);
  F vsum = V::zero();
  for (long g = 0; g < full; ++g)
    for (int v = 0; v < W; ++v) {
      const F e = exp_clamped<V>(V::sub(V::load(at(g, v)), vshift));
      V::store(at(g, v), e);
      vsum = V::add(vsum, e);
    }
  long g = full;
  if (rest > 0) {
    for (int v = 0; v < W; ++v) {
      const auto tail = tail_from<V>(rest, v * V::kLanes);
      const F e = V::keep(tail, exp_clamped<V>(V::sub(V::load(at(g, v), tail), vshift)));
      V::store(at(g, v), e);
      vsum = V::add(vsum, e);
    }
    ++g;
  }
  for (; g < groups; ++g)
    for (int v = 0; v < W; ++v) V::store(at(g, v), V::zero());
  return 1.0f / V::hsum(vsum);
}

// Step 3 for NP value panels from panel p0: out rows (MR, out_stride), columns 16 p0 .. =
// inv[r] * sum over positions s < seen of e[r][s] V[s]. With MASKED (the last panel when the
// head's width is not a multiple of 16; NP is 1 then), only its head_dim - 16 p0 columns.
// The sums may be taken in parts, blocks [b0, b1) a call: a call after the first carries on
// from the sums the one before left in `partial` (MR x NP x 16 floats), and every call but
// the last leaves them there instead of writing out, so each sum stays one chain over the
// positions in order.
template <class V, int MR, int NP, bool MASKED>
void weigh_values(float* out, long out_stride, const float* e, const float* inv, const Head& head, long p0,
                  long seen, long b0 = 0, long b1 = LONG_MAX, float* partial = nullptr) {
  using F = typename V::F;
  constexpr int W = kVecs<V>;
  typename V::Tail tail[W];
  if constexpr (MASKED)
    for (int v = 0; v < W; ++v)
      tail[v] = tail_from<V>(head.head_dim, kGroup * p0 + v * V::kLanes);
  const auto load = [&](const float* p, int v) {
    if constexpr (MASKED) return V::load(p, tail[v]);
    else return V::load(p);
  };
  F acc[MR * NP * W];
#pragma GCC unroll 32
  for (int i = 0; i < MR * NP * W; ++i) acc[i] = b0 > 0 ? V::load(partial + i * V::kLanes) : V::zero();
  const long BP = head.block_positions;
  for (long b = b0; b < b1 && b * BP < seen; ++b) {
    // This block's panels, and the next block's (or this one's again) for the prefetches:
    // kAhead positions ahead, into the next block near the end of this one.
    const float* panel[NP];
    const float* next[NP];
    const long next_block = b + 1 < b1 && (b + 1) * BP < seen ? b + 1 : b;
    for (int p = 0; p < NP; ++p) {
      panel[p] = head.value_block(b) + (p0 + p) * kGroup * BP;
      next[p] = head.value_block(next_block) + (p0 + p) * kGroup * BP;
    }
    const long end = std::min(BP, seen - b * BP);
    for (long j0 = 0; j0 < end; j0 += kGroup) {
      const float* eg = e + (b * BP + j0) / kGroup * kGroup * MR;  // the group of positions b BP + j0 ..
      const long n = std::min(kGroup, end - j0);
      for (long j = 0; j < n; ++j) {
        F row[NP * W];
#pragma GCC unroll 8
        for (int i = 0; i < NP * W; ++i) row[i] = load(panel[i / W] + kGroup * (j0 + j) + (i % W) * V::kLanes, i % W);
        const long ahead = j0 + j + kAhead;
#pragma GCC unroll 4
        for (int p = 0; p < NP; ++p)
          V::prefetch(ahead < BP ? panel[p] + kGroup * ahead : next[p] + kGroup * (ahead - BP));
#pragma GCC unroll 12
        for (int r = 0; r < MR; ++r) {
          const F x = V::set1(eg[r * kGroup + j]);
#pragma GCC unroll 8
          for (int i = 0; i < NP * W; ++i) acc[r * NP * W + i] = V::fma(x, row[i], acc[r * NP * W + i]);
        }
      }
    }
  }
  if (b1 < (seen + BP - 1) / BP) {  // blocks past b1 hold positions still to come
#pragma GCC unroll 32
    for (int i = 0; i < MR * NP * W; ++i) V::store(partial + i * V::kLanes, acc[i]);
    return;
  }
#pragma GCC unroll 32
  for (int i = 0; i < MR * NP * W; ++i) {
    const int r = i / (NP * W), p = i % (NP * W) / W, v = i % W;
    float* o = out + r * out_stride + kGroup * (p0 + p) + v * V::kLanes;
    const F y = V::mul(acc[i], V::set1(inv[r]));
    if constexpr (MASKED) V::store(o, y, tail[v]);
    else V::store(o, y);
  }
}

// Per thread, grown to the longest context seen: the tile's scores and its packed queries.
struct Buffers {
  std::vector<float> scores, queries;
};

// One tile of MR query rows, the first at position pos (row r at pos + r).
template <class V, int MR>
void attend_tile(float* out, long out_stride, const float* q, long q_stride, const Head& head, long pos,
                 Buffers& buffers) {
  const long D = head.head_dim, seen = pos + MR, groups = (seen + kGroup - 1) / kGroup;
  if (buffers.scores.size() < static_cast<std::size_t>(groups * kGroup * MR))
    buffers.scores.resize(static_cast<std::size_t>(groups * kGroup * MR));
  if (buffers.queries.size() < static_cast<std::size_t>(D * MR)) buffers.queries.resize(static_cast<std::size_t>(D * MR));
  float* s = buffers.scores.data();
  float* qt = buffers.queries.data();
  for (long d = 0; d < D; ++d)
    for (int r = 0; r < MR; ++r) qt[d * MR + r] = q[r * q_stride + d];
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  // Wider groups of keys for few rows: more independent chains while each key is loaded.
  constexpr int kScoreGroups = scaled<V>(MR <= 2 ? 8 : MR <= 6 ? 4 : 2);
  long g = 0;
  for (; g + kScoreGroups <= groups; g += kScoreGroups)
    score_groups<V, MR, kScoreGroups>(s + g * kGroup * MR, qt, head, g, groups, scale);
  for (; g < groups; ++g) score_groups<V, MR, 1>(s + g * kGroup * MR, qt, head, g, groups, scale);
  float inv[MR];
  for (int r = 0; r < MR; ++r) inv[r] = softmax_row<V, MR>(s, r, pos + r + 1, groups);
  const long full_panels = D / kGroup;
  constexpr int kValuePanels = scaled<V>(MR <= 6 ? 4 : 2);
  long p = 0;
  for (; p + kValuePanels <= full_panels; p += kValuePanels)
    weigh_values<V, MR, kValuePanels, false>(out, out_stride, s, inv, head, p, seen);
  for (; p < full_panels; ++p) weigh_values<V, MR, 1, false>(out, out_stride, s, inv, head, p, seen);
  if (D % kGroup != 0) weigh_values<V, MR, 1, true>(out, out_stride, s, inv, head, p, seen);
}

// A tile of `rows` rows (1 .. MR) on the instantiation for exactly that many.
template <class V, int MR>
void attend_rows(int rows, float* out, long out_stride, const float* q, long q_stride, const Head& head, long pos,
                 Buffers& buffers) {
  if constexpr (MR > 1)
    if (rows < MR) return attend_rows<V, MR - 1>(rows, out, out_stride, q, q_stride, head, pos, buffers);
  attend_tile<V, MR>(out, out_stride, q, q_stride, head, pos, buffers);
}

// One query row at position pos over `heads` heads side by side in each block (head i at
// offset i * head_floats), out and q (heads x head_dim). The same three steps on the same
// functions as a one-row tile, so each head's output equals attend_tile's bit for bit (the value
// sums carried from block to block in `partial`); but block by block across the heads, and one
// key group or value panel at a time, so the reads run through memory in address order: a
// block's keys of consecutive heads are one run, its values another. One head at a time reads
// runs of 8 KiB per block at 32 positions, each started cold, and two groups or panels side by
// side make two runs (docs/performance.md, "Decode attention across the heads").
struct RowBuffers {
  std::vector<float> scores, partial, inv;
};

template <class V>
void attend_row_heads(float* out, const float* q, const Head& first, long head_floats, long heads, long pos,
                      RowBuffers& buffers) {
  const long D = first.head_dim, BP = first.block_positions, seen = pos + 1;
  const long groups = (seen + kGroup - 1) / kGroup, blocks = (seen + BP - 1) / BP;
  const long panels = (D + kGroup - 1) / kGroup, stride = groups * kGroup;  // stride: a head's scores
  const auto grow = [](std::vector<float>& v, long n) {
    if (v.size() < static_cast<std::size_t>(n)) v.resize(static_cast<std::size_t>(n));
  };
  grow(buffers.scores, heads * stride);
  grow(buffers.partial, heads * panels * kGroup);
  grow(buffers.inv, heads);
  const auto head = [&](long h) {
    Head at = first;
    at.offset += h * head_floats;
    return at;
  };
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  for (long b = 0; b < blocks; ++b) {
    // Prefetches stop at the block's end (g1): what comes next in memory is the next head's.
    const long g0 = b * BP / kGroup, g1 = std::min(groups, (b + 1) * BP / kGroup);
    for (long h = 0; h < heads; ++h)
      for (long g = g0; g < g1; ++g)
        score_groups<V, 1, 1>(buffers.scores.data() + h * stride + g * kGroup, q + h * D, head(h), g, g1, scale);
  }
  for (long h = 0; h < heads; ++h)
    buffers.inv[static_cast<std::size_t>(h)] = softmax_row<V, 1>(buffers.scores.data() + h * stride, 0, seen, groups);
  for (long b = 0; b < blocks; ++b)
    for (long h = 0; h < heads; ++h) {
      const Head at = head(h);
      const float* e = buffers.scores.data() + h * stride;
      const float* inv = buffers.inv.data() + h;
      float* partial = buffers.partial.data() + h * panels * kGroup;
      long p = 0;
      for (; p < D / kGroup; ++p)
        weigh_values<V, 1, 1, false>(out + h * D, 0, e, inv, at, p, seen, b, b + 1, partial + p * kGroup);
      if (D % kGroup != 0)
        weigh_values<V, 1, 1, true>(out + h * D, 0, e, inv, at, p, seen, b, b + 1, partial + p * kGroup);
    }
}

}  // namespace kael::kernels::family::attention

namespace kael::kernels::family {

template <class V>
void attend_row(float* out, const float* q, const float* const* key_blocks, const float* const* value_blocks,
                std::int64_t head_floats, std::int64_t heads, std::int64_t block_positions, std::int64_t pos,
                std::int64_t head_dim) {
  thread_local attention::RowBuffers buffers;
  const attention::Head first{key_blocks, value_blocks, block_positions, head_dim};
  attention::attend_row_heads<V>(out, q, first, head_floats, heads, pos, buffers);
}

template <class V>
void attend_head(float* out, std::int64_t out_stride, const float* q, std::int64_t q_stride,
                 const float* const* key_blocks, const float* const* value_blocks, std::int64_t block_positions,
                 std::int64_t T, std::int64_t pos0, std::int64_t head_dim) {
  thread_local attention::Buffers buffers;
  const attention::Head head{key_blocks, value_blocks, block_positions, head_dim};
  for (std::int64_t t0 = 0; t0 < T; t0 += V::kTileRows) {
    const int rows = static_cast<int>(std::min<std::int64_t>(V::kTileRows, T - t0));
    attention::attend_rows<V, V::kTileRows>(rows, out + t0 * out_stride, out_stride, q + t0 * q_stride, q_stride,
                                            head, pos0 + t0, buffers);
  }
}

}  // namespace kael::kernels::family
