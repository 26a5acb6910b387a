#include "kael/nn/gpt.hpp"

#include <cmath>
#include <vector>

#include "kael/core/error.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "kernels/attention.hpp"
#include "nn/packed_weight.hpp"

namespace kael::nn {

void GptConfig::validate() const {
  if (vocab_size <= 0 || n_positions <= 0 || n_layer <= 0 || n_head <= 0 || n_embd <= 0)
    throw ValueError(str("GptConfig: sizes must be positive (vocab_size ", vocab_size, ", n_positions ", n_positions,
                         ", n_layer ", n_layer, ", n_head ", n_head, ", n_embd ", n_embd, ")"));
  if (n_embd % n_head != 0)
    throw ValueError(str("GptConfig: n_embd ", n_embd, " does not divide into ", n_head, " heads"));
  if (!(dropout >= 0.0 && dropout < 1.0)) throw ValueError(str("GptConfig: dropout must be in [0, 1), got ", dropout));
  if (!(layer_norm_eps > 0.0)) throw ValueError(str("GptConfig: layer_norm_eps must be positive, got ", layer_norm_eps));
}

CausalSelfAttention::CausalSelfAttention(const GptConfig& config) : n_head_(config.n_head), dropout_(config.dropout) {
  qkv = register_module("qkv", std::make_shared<Linear>(config.n_embd, 3 * config.n_embd, config.bias));
  proj = register_module("proj", std::make_shared<Linear>(config.n_embd, config.n_embd, config.bias));
  residual_dropout_ = register_module("dropout", std::make_shared<Dropout>(config.dropout));
}

Tensor CausalSelfAttention::forward(const Tensor& x) { return forward(x, nullptr, 0); }

Tensor CausalSelfAttention::forward(const Tensor& x, KVCache* cache, std::size_t layer) {
  if (x.dim() != 3) throw ValueError(str("CausalSelfAttention: expected (B, T, C), got shape ", shape_to_string(x.shape())));
  const std::int64_t B = x.size(0), T = x.size(1), C = x.size(2), D = C / n_head_;
  const bool dropping = is_training() && dropout_ > 0.0;
  Tensor qkv_rows = qkv->forward(x);  // (B, T, 3C)
  KVCache::Layer* cached = nullptr;
  std::int64_t past = 0;
  if (cache) {
    if (qkv_rows.dtype() != DType::F32)
      throw TypeError(str("CausalSelfAttention: a KVCache holds F32, the model computes in ", dtype_name(qkv_rows.dtype())));
    cached = &cache->layer(layer, B, n_head_, D);
    past = cached->length;
  }
  if (cached && !dropping && !autograd::any_requires_grad({&qkv_rows})) {
    // Inference over the cache: the new keys and values written in place, then the engine's
    // attention kernel over the cache (kernels/attention.hpp), one sequence at a time.
    qkv_rows = qkv_rows.contiguous();
    const float* rows = qkv_rows.data<float>();
    cache->append(*cached, rows + C, rows + 2 * C, 3 * C, T);
    Tensor y = Tensor::empty(DType::F32, {B, T, C});
    std::vector<float> scratch(static_cast<std::size_t>(kernels::attention_scratch_size(T, past, n_head_)));
    const std::int64_t floats = cached->sequence_floats();
    for (std::int64_t b = 0; b < B; ++b)
      kernels::cached_attention(y.data<float>() + b * T * C, scratch.data(), rows + b * T * 3 * C, 3 * C,
                                cached->keys.data() + b * floats, cached->values.data() + b * floats, T, past, n_head_,
                                D, cached->capacity);
    return residual_dropout_->forward(proj->forward(y));
  }
  // (B, T, 3C) -> three (B, heads, T, D)
  const Tensor qkv_out = qkv_rows.view({B, T, 3, n_head_, D}).permute({2, 0, 3, 1, 4});
  const Tensor q = qkv_out.select(0, 0);
  Tensor k = qkv_out.select(0, 1), v = qkv_out.select(0, 2);
  if (cached) {
    // With a gradient (or attention dropout): the cached positions as constants before the new ones.
    if (past > 0) {
      const auto [keys, values] = KVCache::past_tensors(*cached, past);
      k = cat({keys, k}, 2);
      v = cat({values, v}, 2);
    }
    const Tensor stored = qkv_rows.detach().contiguous();
    cache->append(*cached, stored.data<float>() + C, stored.data<float>() + 2 * C, 3 * C, T);
  }
  Tensor y;  // (B, heads, T, D)
  // Dropout on the attention weights (training) is scaled_dot_product_attention's own: in F32
  // with no cached positions, on the training attention kernels (kernels/attention_train.hpp).
  const double attention_dropout = dropping ? dropout_ : 0.0;
  if (past == 0) {
    y = scaled_dot_product_attention(q, k, v, /*is_causal=*/true, Tensor(), std::nullopt, attention_dropout);
  } else if (T == 1 && !dropping) {
    y = scaled_dot_product_attention(q, k, v);  // one new position sees every cached one
  } else {
    // Row t (position past + t) sees keys s <= past + t.
    const Tensor rows = arange(T, DType::I64).unsqueeze(1) + past, cols = arange(past + T, DType::I64).unsqueeze(0);
    const Tensor allowed = le(cols, rows);  // (T, past + T)
    y = scaled_dot_product_attention(q, k, v, false, allowed, std::nullopt, attention_dropout);
  }
  return residual_dropout_->forward(proj->forward(y.transpose(1, 2).reshape({B, T, C})));
}

MLP::MLP(const GptConfig& config) {
  fc1 = register_module("fc1", std::make_shared<Linear>(config.n_embd, 4 * config.n_embd, config.bias));
  fc2 = register_module("fc2", std::make_shared<Linear>(4 * config.n_embd, config.n_embd, config.bias));
  gelu_ = register_module("gelu", std::make_shared<GELU>(config.tanh_gelu ? "tanh" : "none"));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(config.dropout));
}

Tensor MLP::forward(const Tensor& x) { return dropout_->forward(fc2->forward(gelu_->forward(fc1->forward(x)))); }

Block::Block(const GptConfig& config) {
  ln1 = register_module("ln1", std::make_shared<LayerNorm>(config.n_embd, config.layer_norm_eps));
  attn = register_module("attn", std::make_shared<CausalSelfAttention>(config));
  ln2 = register_module("ln2", std::make_shared<LayerNorm>(config.n_embd, config.layer_norm_eps));
  mlp = register_module("mlp", std::make_shared<MLP>(config));
}

Tensor Block::forward(const Tensor& x) { return forward(x, nullptr, 0); }

Tensor Block::forward(const Tensor& x, KVCache* cache, std::size_t layer) {
  const Tensor h = x + attn->forward(ln1->forward(x), cache, layer);
  return h + mlp->forward(ln2->forward(h));
}

GPT::GPT(const GptConfig& config) : config_(config), tied_head_(std::make_shared<detail::PackedWeight>()) {
  config_.validate();
  token_embedding = register_module("token_embedding", std::make_shared<Embedding>(config.vocab_size, config.n_embd));
  position_embedding = register_module("position_embedding", std::make_shared<Embedding>(config.n_positions, config.n_embd));
  embedding_dropout_ = register_module("dropout", std::make_shared<Dropout>(config.dropout));
  blocks = register_module("blocks", std::make_shared<ModuleList<Block>>());
  for (std::int64_t i = 0; i < config.n_layer; ++i) blocks->push_back(std::make_shared<Block>(config));
  ln_final = register_module("ln_final", std::make_shared<LayerNorm>(config.n_embd, config.layer_norm_eps));
  if (!config.tied_embeddings)
    lm_head = register_module("lm_head", std::make_shared<Linear>(config.n_embd, config.vocab_size, false));
  // GPT-2's initialization: N(0, 0.02) weights, zero biases, and the two projections into the
  // residual stream of each block scaled down by sqrt(2 n_layer).
  const autograd::NoGradGuard guard;
  const auto normal = [](Tensor& t, double std) { t.copy_(randn(t.shape()) * std); };
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config.n_layer));
  normal(token_embedding->weight, 0.02);
  normal(position_embedding->weight, 0.02);
  if (lm_head) normal(lm_head->weight, 0.02);
  for (const auto& block : *blocks) {
    for (Linear* layer : {block->attn->qkv.get(), block->attn->proj.get(), block->mlp->fc1.get(), block->mlp->fc2.get()}) {
      const bool into_residual = layer == block->attn->proj.get() || layer == block->mlp->fc2.get();
      normal(layer->weight, into_residual ? residual_std : 0.02);
      if (layer->bias.defined()) layer->bias.zero_();
    }
  }
}

Tensor GPT::forward(const Tensor& ids) { return forward(ids, nullptr); }

Tensor GPT::forward(const Tensor& ids, KVCache* cache) {
  if (ids.dim() != 2) throw ValueError(str("GPT: ids must have shape (B, T), got ", shape_to_string(ids.shape())));
  if (is_floating(ids.dtype())) throw TypeError(str("GPT: ids must be integers, not ", dtype_name(ids.dtype())));
  const std::int64_t past = cache ? cache->length() : 0, T = ids.size(1);
  if (T == 0) throw ValueError("GPT: ids hold no positions (T = 0)");
  if (past + T > config_.n_positions)
    throw ValueError(str("GPT: ", past + T, " positions exceed the context of ", config_.n_positions));
  const Tensor positions = arange(static_cast<double>(past), static_cast<double>(past + T), 1, DType::I64);
  Tensor x = embedding_dropout_->forward(token_embedding->forward(ids) + position_embedding->forward(positions));
  for (std::size_t i = 0; i < blocks->size(); ++i) x = (*blocks)[i].forward(x, cache, i);
  x = ln_final->forward(x);
  if (lm_head) return lm_head->forward(x);  // (B, T, vocab)
  if (!is_training() && detail::PackedWeight::applies(x, token_embedding->weight, Tensor()))
    return tied_head_->linear(x, token_embedding->weight, Tensor());  // as Linear's inference
  tied_head_->clear();
  return linear(x, token_embedding->weight);
}

}  // namespace kael::nn
