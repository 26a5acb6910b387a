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

namespace ref {
void causal_attention(float* out, float* scratch, const float* q, const float* k_cache, const float* v_cache,
                      std::int64_t T, std::int64_t pos0, std::int64_t n_head, std::int64_t head_dim,
                      std::int64_t q_stride, std::int64_t kv_stride);
}  // namespace ref

}  // namespace kael::kernels
