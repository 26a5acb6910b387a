// Attention, on the set's fused kernel for one head where it has one (kernel_table.hpp's
// attend_head: every vector set, family/attention.hpp; a decode row through its attend_row, a
// thread's heads at once), otherwise (the scalar set) as two
// matrix products per head, on the
// run-time-dispatched kernels of gemm.hpp:
//   S = scale * Q K^T   (T, L) with L = pos0 + T cached positions    (gemm_view)
//   P = causal softmax of each row of S: row t keeps columns 0..pos0+t, the rest become 0
//   O = P V             (T, head_dim)                                 (gemm_view)
// K^T and V are panel views: the model's cache is kept in that layout (kv_store), row-major
// caches are packed per call.
// The query rows go in chunks that see positions up to the chunk's last row: only a band of
// the upper triangle, a chunk wide, is computed and thrown away; in exchange both products
// run at GEMM speed. Every output is computed the same way whatever
// T is (the zeros add exactly nothing), so prefill rows equal decode rows bit for bit.
#include "kernels/attention.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/gemm.hpp"
#include "kernels/dispatch/kernel_table.hpp"
#include "kernels/norm.hpp"
#include "kernels/infra/thread_pool.hpp"

namespace kael::kernels {
namespace {

// The head's keys as a packed (head_dim, L) matrix, K^T in the panel layout of gemm.hpp:
// panel p holds positions 16p.. (w of them) for every d, row d at kp + 16 p head_dim + d w.
void pack_keys(float* kp, const float* k, std::int64_t L, std::int64_t head_dim, std::int64_t stride) {
  for (std::int64_t s0 = 0; s0 < L; s0 += kPanel) {
    const std::int64_t w = std::min(kPanel, L - s0);
    float* panel = kp + s0 * head_dim;
    for (std::int64_t j = 0; j < w; ++j)
      for (std::int64_t d = 0; d < head_dim; ++d) panel[d * w + j] = k[(s0 + j) * stride + d];
  }
}

// The head's values as a packed (L, head_dim) matrix.
void pack_values(float* vp, const float* v, std::int64_t L, std::int64_t head_dim, std::int64_t stride) {
  for (std::int64_t d0 = 0; d0 < head_dim; d0 += kPanel) {
    const std::int64_t w = std::min(kPanel, head_dim - d0);
    float* panel = vp + d0 * L;
    for (std::int64_t s = 0; s < L; ++s) std::copy_n(v + s * stride + d0, w, panel + s * w);
  }
}

// Query rows per causal chunk: a chunk's rows see positions up to its last row only, so of
// the T x T upper triangle just a chunk-wide band is computed (and thrown away).
constexpr std::int64_t kCausalChunk = 48;

// One head of T query rows against L = pos0 + T positions, values as a panel view (gemm.hpp);
// scores (T, L). key_scores(scores, q, rows, columns) fills scores (rows, columns; ld L) with
// q (rows, head_dim; q_stride) times the first `columns` keys. Rows go in chunks; a chunk's
// rows t0..t1-1 use positions [0, pos0 + t1), the positions past a row's own are zero in P and
// add exactly nothing, so each row equals the same row computed alone (a decode step).
template <typename KeyScores>
void attend_with(float* out, std::int64_t out_stride, float* scores, const float* q, std::int64_t q_stride,
                 KeyScores&& key_scores, const PanelView& v, std::int64_t T, std::int64_t pos0, std::int64_t head_dim) {
  const std::int64_t L = pos0 + T;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  for (std::int64_t t0 = 0; t0 < T; t0 += kCausalChunk) {
    const std::int64_t t1 = std::min(T, t0 + kCausalChunk), seen = pos0 + t1;
    // Scores in whole key panels: a packed view's narrower panel is only its last one.
    const std::int64_t columns = std::min(L, (seen + kPanel - 1) / kPanel * kPanel);
    float* chunk = scores + t0 * L;  // (t1 - t0, columns; L)
    key_scores(chunk, q + t0 * q_stride, t1 - t0, columns);
    for (std::int64_t t = t0; t < t1; ++t) {
      float* row = scores + t * L;
      for (std::int64_t s = 0; s <= pos0 + t; ++s) row[s] *= scale;
      softmax(row, row, pos0 + t + 1);
      std::fill(row + pos0 + t + 1, row + seen, 0.0f);
    }
    gemm_view(out + t0 * out_stride, out_stride, chunk, L, v, t1 - t0, head_dim, seen);  // (t1 - t0, head_dim)
  }
}

// attend_with for keys as one panel view.
void attend(float* out, std::int64_t out_stride, float* scores, const float* q, std::int64_t q_stride,
            const PanelView& kt, const PanelView& v, std::int64_t T, std::int64_t pos0, std::int64_t head_dim) {
  const std::int64_t L = pos0 + T;
  const auto key_scores = [&](float* s, const float* qr, std::int64_t rows, std::int64_t columns) {
    gemm_view(s, L, qr, q_stride, kt, rows, columns, head_dim);
  };
  attend_with(out, out_stride, scores, q, q_stride, key_scores, v, T, pos0, head_dim);
}

// attend for head h of a block table: keys read in place, BP columns per block (each score is
// its own dot product, so the split changes no bit); the values of several blocks copied into
// `gathered` (the calling thread's buffer, grown as needed) as one panel view, because P V
// sums over the positions in one ordered chain.
void attend_paged(float* out, std::int64_t out_stride, float* scores, const float* q, std::int64_t q_stride,
                  const KvBlocks& cache, std::int64_t h, std::int64_t T, std::int64_t pos0, std::int64_t head_dim,
                  std::vector<float>& gathered) {
  const std::int64_t L = pos0 + T, BP = cache.block_positions;
  const std::int64_t head_floats = kv_head_floats(head_dim, BP), n_blocks = (L + BP - 1) / BP;
  const auto key_scores = [&](float* s, const float* qr, std::int64_t rows, std::int64_t columns) {
    for (std::int64_t b = 0; b * BP < columns; ++b) {
      const PanelView kt{cache.blocks[b] + cache.key_offset + h * head_floats, kPanel, kPanel * head_dim, false};
      gemm_view(s + b * BP, L, qr, q_stride, kt, rows, std::min(BP, columns - b * BP), head_dim);
    }
  };
  PanelView v{cache.blocks[0] + cache.value_offset + h * head_floats, kPanel, kPanel * BP, false};
  if (n_blocks > 1) {  // the values as one (L, head_dim) panel view, capacity L rounded up
    const std::int64_t capacity = kv_capacity(L);
    if (gathered.size() < static_cast<std::size_t>(kv_head_floats(head_dim, L)))
      gathered.resize(static_cast<std::size_t>(kv_head_floats(head_dim, L)));
    for (std::int64_t d0 = 0; d0 < head_dim; d0 += kPanel)
      for (std::int64_t b = 0; b < n_blocks; ++b)
        std::copy_n(cache.blocks[b] + cache.value_offset + h * head_floats + d0 * BP, std::min(BP, L - b * BP) * kPanel,
                    gathered.data() + d0 * capacity + b * BP * kPanel);
    v = {gathered.data(), kPanel, kPanel * capacity, false};
  }
  attend_with(out, out_stride, scores, q, q_stride, key_scores, v, T, pos0, head_dim);
}

// The head h of a cache layer as panel views.
PanelView keys_of(const float* k_layer, std::int64_t h, std::int64_t head_dim, std::int64_t capacity) {
  return {k_layer + h * kv_head_floats(head_dim, capacity), kPanel, kPanel * head_dim, false};
}
PanelView values_of(const float* v_layer, std::int64_t h, std::int64_t head_dim, std::int64_t capacity) {
  return {v_layer + h * kv_head_floats(head_dim, capacity), kPanel, kPanel * capacity, false};
}

// Threads split attention four times finer than a GEMM: the two products per head come with a
// softmax and a scattered read of the cache, so a pair's work is more than its multiply-adds.
std::int64_t min_items(std::int64_t work_per_item) { return min_items_per_thread(work_per_item, kMinThreadWork / 4); }

// Heads per thread for T rows attending to L positions: each head streams its L cached keys
// and values, which decide for one row (decode), as a decode product's weights do.
std::int64_t min_heads(std::int64_t T, std::int64_t L, std::int64_t head_dim) {
  const std::int64_t kv_bytes = 2 * L * head_dim * std::int64_t{sizeof(float)};
  return min_product_items_per_thread(T * L * head_dim, kv_bytes, kMinThreadWork / 4);
}

// The set's fused kernel for one head (kernel_table.hpp), null where the set has none; then
// the two products above run instead.
AttendHeadFn* fused_kernel() { return active_kernels().attend_head; }

// Head h's key and value panels in the blocks holding positions 0 .. L - 1 of a block table,
// as the fused kernels' two pointer tables (the calling thread's, grown as needed).
struct BlockTables {
  const float* const* keys;
  const float* const* values;
};
BlockTables block_tables(const KvBlocks& cache, std::int64_t h, std::int64_t L, std::int64_t head_dim) {
  thread_local std::vector<const float*> keys, values;
  const std::int64_t BP = cache.block_positions, n_blocks = (L + BP - 1) / BP;
  const std::int64_t head_offset = h * kv_head_floats(head_dim, BP);
  keys.resize(static_cast<std::size_t>(n_blocks));
  values.resize(static_cast<std::size_t>(n_blocks));
  for (std::int64_t b = 0; b < n_blocks; ++b) {
    keys[b] = cache.blocks[b] + cache.key_offset + head_offset;
    values[b] = cache.blocks[b] + cache.value_offset + head_offset;
  }
  return {keys.data(), values.data()};
}

// The fused kernel on head h of a block table.
void attend_fused(AttendHeadFn* kernel, float* out, std::int64_t out_stride, const float* q, std::int64_t q_stride,
                  const KvBlocks& cache, std::int64_t h, std::int64_t T, std::int64_t pos0, std::int64_t head_dim) {
  const BlockTables tables = block_tables(cache, h, pos0 + T, head_dim);
  kernel(out, out_stride, q, q_stride, tables.keys, tables.values, cache.block_positions, T, pos0, head_dim);
}

// One decode row at position pos on heads h .. h + heads - 1 (out and q at those heads' first).
// The row kernel reads each block's keys and values across the heads in memory order, which
// streams: one head at a time reads 8 KiB runs per block, each started cold
// (docs/performance.md, "Decode attention across the heads").
void attend_row_fused(float* out, const float* q, const KvBlocks& cache, std::int64_t h, std::int64_t heads,
                      std::int64_t pos, std::int64_t head_dim) {
  const BlockTables tables = block_tables(cache, h, pos + 1, head_dim);
  active_kernels().attend_row(out, q, tables.keys, tables.values, kv_head_floats(head_dim, cache.block_positions), heads,
                              cache.block_positions, pos, head_dim);
}

// kv_store for head h of n consecutive positions pos.. within one 16-position panel (row t's
// key at k + t stride, its value at v + t stride). Keys by dimension, so each K^T row of the
// panel (one cache line) is written in one go instead of a float at a time per position.
void kv_store_run(float* k_layer, float* v_layer, const float* k, const float* v, std::int64_t stride,
                  std::int64_t pos, std::int64_t n, std::int64_t h, std::int64_t head_dim, std::int64_t capacity) {
  const std::int64_t head = h * kv_head_floats(head_dim, capacity), panel = pos / kPanel * kPanel;
  float* kt = k_layer + head + panel * head_dim + pos % kPanel;  // column pos of K^T
  const float* kh = k + h * head_dim;
  for (std::int64_t d = 0; d < head_dim; ++d)
    for (std::int64_t t = 0; t < n; ++t) kt[d * kPanel + t] = kh[t * stride + d];
  float* vh = v_layer + head + pos * kPanel;  // row pos of each value panel
  const float* vr = v + h * head_dim;
  for (std::int64_t d0 = 0; d0 < head_dim; d0 += kPanel) {
    const std::int64_t w = std::min(kPanel, head_dim - d0);
    for (std::int64_t t = 0; t < n; ++t)
      for (std::int64_t i = 0; i < w; ++i) vh[d0 * capacity + t * kPanel + i] = vr[t * stride + d0 + i];
  }
}

// kv_store_run for head h of positions pos.. pos + n - 1 of a block table, in runs that stay
// within a panel (and so within a block).
void kv_store_paged_head(const KvBlocks& cache, const float* k, const float* v, std::int64_t stride,
                         std::int64_t pos, std::int64_t n, std::int64_t h, std::int64_t head_dim) {
  for (std::int64_t t = 0; t < n;) {
    const std::int64_t p = pos + t, run = std::min(kPanel - p % kPanel, n - t);
    float* block = cache.blocks[p / cache.block_positions];
    kv_store_run(block + cache.key_offset, block + cache.value_offset, k + t * stride, v + t * stride, stride,
                 p % cache.block_positions, run, h, head_dim, cache.block_positions);
    t += run;
  }
}

}  // namespace

void causal_attention(float* out, float* scratch, const float* q, const float* k_cache, const float* v_cache,
                      std::int64_t T, std::int64_t pos0, std::int64_t n_head, std::int64_t head_dim,
                      std::int64_t q_stride, std::int64_t kv_stride) {
  const std::int64_t L = pos0 + T, C = n_head * head_dim;
  AttendHeadFn* const kernel = fused_kernel();
  // Threads take whole heads: every head has the same work.
  parallel_for(n_head, min_heads(T, L, head_dim), [&](std::int64_t first, std::int64_t last) {
    // Row-major caches are packed per call (L * head_dim floats each way, against
    // T * L * head_dim multiply-adds): straight from rows n_embd floats apart, the
    // micro-kernel's 16-wide loads hit a handful of L1 sets and thrashed. For the fused kernel
    // into the cache layout (one block holding the whole context), otherwise into packed
    // panels. Per thread, grown to the longest context seen.
    thread_local std::vector<float> kp, vp;
    const std::int64_t capacity = kv_capacity(L), floats = kernel ? kv_head_floats(head_dim, L) : head_dim * L;
    if (kp.size() < static_cast<std::size_t>(floats)) {
      kp.resize(static_cast<std::size_t>(floats));
      vp.resize(static_cast<std::size_t>(floats));
    }
    for (std::int64_t h = first; h < last; ++h) {
      const std::int64_t offset = h * head_dim;
      if (kernel) {
        for (std::int64_t s = 0; s < L; s += kPanel)
          kv_store_run(kp.data(), vp.data(), k_cache + s * kv_stride + offset, v_cache + s * kv_stride + offset,
                       kv_stride, s, std::min(kPanel, L - s), 0, head_dim, capacity);
        const float* keys = kp.data();
        const float* values = vp.data();
        kernel(out + offset, C, q + offset, q_stride, &keys, &values, capacity, T, pos0, head_dim);
        continue;
      }
      pack_keys(kp.data(), k_cache + offset, L, head_dim, kv_stride);
      pack_values(vp.data(), v_cache + offset, L, head_dim, kv_stride);
      attend(out + offset, C, scratch + h * T * L, q + offset, q_stride, {kp.data(), kPanel, kPanel * head_dim, true},
             {vp.data(), kPanel, kPanel * L, true}, T, pos0, head_dim);
    }
  });
}

void kv_store(float* k_layer, float* v_layer, const float* k, const float* v, std::int64_t pos, std::int64_t n_head,
              std::int64_t head_dim, std::int64_t capacity) {
  for (std::int64_t h = 0; h < n_head; ++h) kv_store_run(k_layer, v_layer, k, v, 0, pos, 1, h, head_dim, capacity);
}

void kv_copy_head(float* to_keys, float* to_values, std::int64_t to_capacity, const float* from_keys,
                  const float* from_values, std::int64_t from_capacity, std::int64_t head_dim, std::int64_t positions) {
  if (positions <= 0) return;  // an empty cache may have no memory behind its pointers
  // Keys: whole panels of K^T, kPanel * head_dim floats each, in the same place whatever the capacity.
  std::copy_n(from_keys, kv_capacity(positions) * head_dim, to_keys);
  // Values: panel d0 (kPanel dimensions) starts at d0 * capacity, one row of kPanel floats a position.
  for (std::int64_t d0 = 0; d0 < head_dim; d0 += kPanel)
    std::copy_n(from_values + d0 * from_capacity, positions * kPanel, to_values + d0 * to_capacity);
}

void kv_load_head(float* keys, float* values, const float* k_head, const float* v_head, std::int64_t capacity,
                  std::int64_t head_dim, std::int64_t positions) {
  for (std::int64_t s = 0; s < positions; ++s)
    for (std::int64_t d = 0; d < head_dim; ++d) {
      keys[s * head_dim + d] = k_head[s / kPanel * kPanel * head_dim + d * kPanel + s % kPanel];
      values[s * head_dim + d] = v_head[d / kPanel * kPanel * capacity + s * kPanel + d % kPanel];
    }
}

void cached_attention(float* out, float* scratch, const float* q, std::int64_t q_stride, const float* k_layer,
                      const float* v_layer, std::int64_t T, std::int64_t pos0, std::int64_t n_head,
                      std::int64_t head_dim, std::int64_t capacity) {
  const std::int64_t L = pos0 + T, C = n_head * head_dim;
  AttendHeadFn* const kernel = fused_kernel();
  parallel_for(n_head, min_heads(T, L, head_dim), [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t h = first; h < last; ++h) {
      const PanelView keys = keys_of(k_layer, h, head_dim, capacity), values = values_of(v_layer, h, head_dim, capacity);
      if (kernel)  // the layer as a single block
        kernel(out + h * head_dim, C, q + h * head_dim, q_stride, &keys.data, &values.data, capacity, T, pos0, head_dim);
      else
        attend(out + h * head_dim, C, scratch + h * T * L, q + h * head_dim, q_stride, keys, values, T, pos0, head_dim);
    }
  });
}

void kv_store_paged(const KvBlocks& cache, const float* k, const float* v, std::int64_t pos, std::int64_t n_head,
                    std::int64_t head_dim) {
  for (std::int64_t h = 0; h < n_head; ++h) kv_store_paged_head(cache, k, v, 0, pos, 1, h, head_dim);
}

void kv_store_paged_rows(const KvBlocks& cache, const float* k, const float* v, std::int64_t stride, std::int64_t T,
                         std::int64_t pos0, std::int64_t n_head, std::int64_t head_dim) {
  // By heads: each thread writes its own heads' panels, whole cache lines of keys at a time.
  parallel_for(n_head, min_items(T * head_dim), [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t h = first; h < last; ++h) kv_store_paged_head(cache, k, v, stride, pos0, T, h, head_dim);
  });
}

void paged_attention(float* out, float* scratch, const float* q, std::int64_t q_stride, const KvBlocks& cache,
                     std::int64_t T, std::int64_t pos0, std::int64_t n_head, std::int64_t head_dim,
                     const NewKv* store) {
  const std::int64_t L = pos0 + T, C = n_head * head_dim;
  AttendHeadFn* const kernel = fused_kernel();
  parallel_for(n_head, min_heads(T, L, head_dim), [&](std::int64_t first, std::int64_t last) {
    if (store)
      for (std::int64_t h = first; h < last; ++h)
        kv_store_paged_head(cache, store->k, store->v, store->stride, pos0, T, h, head_dim);
    if (kernel && T == 1) {  // a decode row: the thread's heads together
      attend_row_fused(out + first * head_dim, q + first * head_dim, cache, first, last - first, pos0, head_dim);
      return;
    }
    thread_local std::vector<float> gathered;
    for (std::int64_t h = first; h < last; ++h)
      if (kernel)
        attend_fused(kernel, out + h * head_dim, C, q + h * head_dim, q_stride, cache, h, T, pos0, head_dim);
      else
        attend_paged(out + h * head_dim, C, scratch + h * T * L, q + h * head_dim, q_stride, cache, h, T, pos0,
                     head_dim, gathered);
  });
}

void paged_attention_rows(const PagedRow* rows, std::int64_t count, float* scratch, std::int64_t scratch_stride,
                          std::int64_t n_head, std::int64_t head_dim) {
  const std::int64_t C = n_head * head_dim;
  std::int64_t positions = 0;
  for (std::int64_t i = 0; i < count; ++i) positions += rows[i].pos + 1;
  // (row, head) pairs, each one query attending to its own sequence's cache.
  const std::int64_t mean_positions = positions / std::max<std::int64_t>(1, count);
  AttendHeadFn* const kernel = fused_kernel();
  parallel_for(count * n_head, min_heads(1, mean_positions, head_dim), [&](std::int64_t first, std::int64_t last) {
    thread_local std::vector<float> gathered;
    for (std::int64_t pair = first; pair < last;) {
      const PagedRow& r = rows[pair / n_head];
      const std::int64_t h = pair % n_head, heads = std::min(last - pair, n_head - h);  // this row's
      if (kernel)
        attend_row_fused(r.out + h * head_dim, r.q + h * head_dim, r.cache, h, heads, r.pos, head_dim);
      else
        for (std::int64_t i = 0; i < heads; ++i)
          attend_paged(r.out + (h + i) * head_dim, C, scratch + (pair + i) * scratch_stride, r.q + (h + i) * head_dim,
                       C, r.cache, h + i, 1, r.pos, head_dim, gathered);
      pair += heads;
    }
  });
}

}  // namespace kael::kernels
