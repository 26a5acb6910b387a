// nn::KVCache: per layer and sequence, kernels/attention.hpp's cache layout, written in place by
// kernels::kv_store and grown by doubling.
#include <algorithm>

#include "kael/core/error.hpp"
#include "kael/nn/gpt.hpp"
#include "kael/tensor/ops.hpp"
#include "kernels/attention.hpp"
#include "kernels/gemm.hpp"

namespace kael::nn {

using kernels::kPanel;  // the layout's panel of positions (keys) and of dimensions (values)

std::int64_t KVCache::Layer::sequence_floats() const { return kernels::kv_layer_floats(heads, head_dim, capacity); }

void KVCache::reserve(std::int64_t positions) {
  if (positions < 0) throw ValueError(str("KVCache: cannot reserve ", positions, " positions"));
  reserved_ = std::max(reserved_, positions);
  for (Layer& layer : layers_)
    if (layer.capacity < positions) grow(layer, positions);
}

void KVCache::clear() {
  layers_.clear();
  reserved_ = 0;
}

KVCache::Layer& KVCache::layer(std::size_t index, std::int64_t batch, std::int64_t heads, std::int64_t head_dim) {
  if (layers_.size() <= index) layers_.resize(index + 1);
  Layer& layer = layers_[index];
  if (layer.batch == 0) {
    layer.batch = batch;
    layer.heads = heads;
    layer.head_dim = head_dim;
    if (reserved_ > 0) grow(layer, reserved_);
  } else if (layer.batch != batch || layer.heads != heads || layer.head_dim != head_dim) {
    throw ValueError(str("KVCache: holds ", layer.batch, " sequences of ", layer.heads, " heads of ", layer.head_dim,
                         ", not ", batch, " of ", heads, " of ", head_dim, " (clear() it to start another batch)"));
  }
  return layer;
}

void KVCache::grow(Layer& layer, std::int64_t positions) {
  // Doubling: n appended positions cost O(n) copies in all.
  const std::int64_t capacity = kernels::kv_capacity(std::max({positions, 2 * layer.capacity, kPanel}));
  Layer bigger = layer;
  bigger.capacity = capacity;
  const std::int64_t old_floats = layer.sequence_floats(), new_floats = bigger.sequence_floats();
  bigger.keys.assign(static_cast<std::size_t>(layer.batch * new_floats), 0.0f);
  bigger.values.assign(static_cast<std::size_t>(layer.batch * new_floats), 0.0f);
  const std::int64_t old_head = kernels::kv_head_floats(layer.head_dim, layer.capacity),
                     new_head = kernels::kv_head_floats(layer.head_dim, capacity);
  for (std::int64_t b = 0; b < layer.batch; ++b)
    for (std::int64_t h = 0; h < layer.heads; ++h) {
      const std::int64_t from = b * old_floats + h * old_head, to = b * new_floats + h * new_head;
      kernels::kv_copy_head(bigger.keys.data() + to, bigger.values.data() + to, capacity, layer.keys.data() + from,
                            layer.values.data() + from, layer.capacity, layer.head_dim, layer.length);
    }
  layer = std::move(bigger);
}

void KVCache::append(Layer& layer, const float* k, const float* v, std::int64_t stride, std::int64_t T) {
  if (layer.length + T > layer.capacity) grow(layer, layer.length + T);
  const std::int64_t floats = layer.sequence_floats();
  for (std::int64_t b = 0; b < layer.batch; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      kernels::kv_store(layer.keys.data() + b * floats, layer.values.data() + b * floats, k + (b * T + t) * stride,
                        v + (b * T + t) * stride, layer.length + t, layer.heads, layer.head_dim, layer.capacity);
  layer.length += T;
}

std::pair<Tensor, Tensor> KVCache::past_tensors(const Layer& layer, std::int64_t past) {
  const std::int64_t B = layer.batch, H = layer.heads, D = layer.head_dim;
  Tensor keys = Tensor::empty(DType::F32, {B, H, past, D}), values = Tensor::empty(DType::F32, {B, H, past, D});
  const std::int64_t floats = layer.sequence_floats(), head = kernels::kv_head_floats(D, layer.capacity);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      const std::int64_t from = b * floats + h * head, to = (b * H + h) * past * D;
      kernels::kv_load_head(keys.data<float>() + to, values.data<float>() + to, layer.keys.data() + from,
                            layer.values.data() + from, layer.capacity, D, past);
    }
  return {keys, values};
}

}  // namespace kael::nn
