// Causal multi-head self-attention over a KV cache.
#pragma once

#include <cstdint>

namespace kael::kernels {

// For each new query row t (absolute position pos0 + t) and head h:
//   out[t, h] = sum_{s <= pos0 + t} softmax_s(q[t, h] . k[s, h] / sqrt(head_dim)) v[s, h]
// q (T, q_stride), k_cache and v_cache (pos0 + T, kv_stride): head h occupies columns
// [h * head_dim, (h + 1) * head_dim) of each row. The cache already holds the T new rows.
// out (T, n_head * head_dim). scratch holds attention_scratch_size(T, pos0) floats.
void causal_attention(float* out, float* scratch, const float* q, const float* k_cache, const float* v_cache,
                      std::int64_t T, std::int64_t pos0, std::int64_t n_head, std::int64_t head_dim,
                      std::int64_t q_stride, std::int64_t kv_stride);

// Floats of scratch that causal_attention needs: one score row per (t, head) pair.
inline std::int64_t attention_scratch_size(std::int64_t T, std::int64_t pos0, std::int64_t n_head) {
  return T * n_head * (pos0 + T);
}

// The KV cache of one layer as the attention kernels read it, so that no step repacks it.
// Per head h, a block of kv_head_floats at h * kv_head_floats (capacity = positions rounded
// up to 16, head_dim likewise): keys as K^T (head_dim, positions) in panels of 16 positions,
// panel p at + 16 p head_dim, row d of it 16 floats (one cache line) at + 16 d; values as
// V (positions, head_dim) in panels of 16 dimensions, panel q at + 16 q capacity, position s
// at + 16 s. Both are gemm.hpp panel views with ldb = 16.
inline std::int64_t kv_capacity(std::int64_t positions) { return (positions + 15) / 16 * 16; }
inline std::int64_t kv_head_floats(std::int64_t head_dim, std::int64_t positions) {
  return (head_dim + 15) / 16 * 16 * kv_capacity(positions);
}
inline std::int64_t kv_layer_floats(std::int64_t n_head, std::int64_t head_dim, std::int64_t positions) {
  return n_head * kv_head_floats(head_dim, positions);
}

// Writes position `pos`'s key k (C) and value v (C), heads side by side, into the layer.
void kv_store(float* k_layer, float* v_layer, const float* k, const float* v, std::int64_t pos, std::int64_t n_head,
              std::int64_t head_dim, std::int64_t capacity);

// One head's positions 0 .. positions - 1, from a head block of from_capacity positions (keys at
// from_keys, values at from_values) into one of to_capacity: what a cache keeps when it grows
// or is copied.
void kv_copy_head(float* to_keys, float* to_values, std::int64_t to_capacity, const float* from_keys,
                  const float* from_values, std::int64_t from_capacity, std::int64_t head_dim, std::int64_t positions);
// One head's positions 0 .. positions - 1 read back as rows: keys and values (positions, head_dim).
void kv_load_head(float* keys, float* values, const float* k_head, const float* v_head, std::int64_t capacity,
                  std::int64_t head_dim, std::int64_t positions);

// causal_attention over a cache in the layout above (which already holds the T new
// positions): the same results, bit for bit.
void cached_attention(float* out, float* scratch, const float* q, std::int64_t q_stride, const float* k_layer,
                      const float* v_layer, std::int64_t T, std::int64_t pos0, std::int64_t n_head,
                      std::int64_t head_dim, std::int64_t capacity);

// A sequence's KV cache in blocks of block_positions (a multiple of 16) consecutive positions,
// each block in its own memory: block b holds positions b * block_positions .. of every layer,
// each layer laid out as above with capacity = block_positions, its keys at
// blocks[b] + key_offset and its values at blocks[b] + value_offset.
struct KvBlocks {
  float* const* blocks;
  std::int64_t key_offset;
  std::int64_t value_offset;
  std::int64_t block_positions;
};

// kv_store into the block that holds position `pos`.
void kv_store_paged(const KvBlocks& cache, const float* k, const float* v, std::int64_t pos, std::int64_t n_head,
                    std::int64_t head_dim);

// kv_store_paged for T consecutive positions pos0.. (row t's key at k + t stride, its value at
// v + t stride), threaded over the heads.
void kv_store_paged_rows(const KvBlocks& cache, const float* k, const float* v, std::int64_t stride, std::int64_t T,
                         std::int64_t pos0, std::int64_t n_head, std::int64_t head_dim);

// cached_attention over a block table (which already holds the T new positions): the same
// results, bit for bit, as over the contiguous layout. Where the set has a fused kernel
// (KernelTable::attend_head: every vector set) it reads keys and values in place and uses none of
// `scratch`, and one row (T = 1, decode) goes across a thread's heads at once (attend_row);
// otherwise keys are read in place, block by block (each score is its own dot
// product), and values gathered per head into a per-thread buffer when there are several
// blocks, because P V sums over positions in one ordered chain.
//
// With `store`, the cache does not hold the T new positions yet: each thread first stores its
// own heads' new keys and values (kv_store_paged_rows' layout and bits), then attends over them.
// A head reads only its own keys and values, so no thread waits for another's stores, and a
// decode step makes one call where it made a parallel one and a serial one.
struct NewKv {
  const float* k;       // row t's key (C) at k + t * stride
  const float* v;       // and its value at v + t * stride
  std::int64_t stride;
};
void paged_attention(float* out, float* scratch, const float* q, std::int64_t q_stride, const KvBlocks& cache,
                     std::int64_t T, std::int64_t pos0, std::int64_t n_head, std::int64_t head_dim,
                     const NewKv* store = nullptr);

// One query row of one sequence for paged_attention_rows: q (C) at position `pos` attends to
// positions 0..pos of its own cache (already holding this token). out (C).
struct PagedRow {
  float* out;
  const float* q;
  KvBlocks cache;
  std::int64_t pos;
};

// Batched decode: each row attends over its own sequence's cache, all rows and heads in one
// threaded pass; each row equals paged_attention with T = 1 bit for bit. scratch holds
// count * n_head * scratch_stride floats, scratch_stride > every row's pos.
void paged_attention_rows(const PagedRow* rows, std::int64_t count, float* scratch, std::int64_t scratch_stride,
                          std::int64_t n_head, std::int64_t head_dim);

namespace ref {
void causal_attention(float* out, float* scratch, const float* q, const float* k_cache, const float* v_cache,
                      std::int64_t T, std::int64_t pos0, std::int64_t n_head, std::int64_t head_dim,
                      std::int64_t q_stride, std::int64_t kv_stride);
}  // namespace ref

}  // namespace kael::kernels
