#include "kernels/attention.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/norm.hpp"
#include "kernels/thread_pool.hpp"
#include "kernels/vec.hpp"

namespace kael::kernels {
namespace {

// One (query row, head) pair: scores over positions 0..pos, softmax, weighted sum of values.
void attend(float* out, float* scores, const float* q, const float* k_cache, const float* v_cache, std::int64_t pos,
            std::int64_t head_dim, std::int64_t kv_stride, float scale) {
  for (std::int64_t s = 0; s <= pos; ++s) scores[s] = vec::dot(q, k_cache + s * kv_stride, head_dim) * scale;
  softmax(scores, scores, pos + 1);
  for (std::int64_t i = 0; i < head_dim; ++i) out[i] = 0.0f;
  for (std::int64_t s = 0; s <= pos; ++s) vec::axpy(out, scores[s], v_cache + s * kv_stride, head_dim);
}

}  // namespace

void causal_attention(float* out, float* scratch, const float* q, const float* k_cache, const float* v_cache,
                      std::int64_t T, std::int64_t pos0, std::int64_t n_head, std::int64_t head_dim,
                      std::int64_t q_stride, std::int64_t kv_stride) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const std::int64_t span = pos0 + T;  // longest score row
  const std::int64_t C = n_head * head_dim;
  // Pairs are numbered head-major (h * T + t): a later row attends to more positions, so
  // contiguous ranges of whole heads balance the threads where ranges of rows would not.
  const std::int64_t min_pairs = std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(1, span * head_dim));
  parallel_for(n_head * T, min_pairs, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t pair = first; pair < last; ++pair) {
      const std::int64_t h = pair / T;
      const std::int64_t t = pair % T;
      const std::int64_t offset = h * head_dim;
      attend(out + t * C + offset, scratch + pair * span, q + t * q_stride + offset, k_cache + offset,
             v_cache + offset, pos0 + t, head_dim, kv_stride, scale);
    }
  });
}

}  // namespace kael::kernels
