// MultiheadAttention, TransformerEncoderLayer and TransformerEncoder (nn/transformer.hpp).
#include "kael/nn/transformer.hpp"

#include <cmath>
#include <limits>

#include "kael/core/error.hpp"
#include "kael/tensor/ops.hpp"
#include "nn/uniform.hpp"

namespace kael::nn {

namespace {

// torch's xavier_uniform_ of a (fan_out, fan_in) weight: uniform in +-sqrt(6 / (fan_in + fan_out)).
Tensor xavier_uniform(std::int64_t fan_out, std::int64_t fan_in) {
  return detail::uniform({fan_out, fan_in}, std::sqrt(6.0 / static_cast<double>(fan_in + fan_out)));
}

}  // namespace

MultiheadAttention::MultiheadAttention(MultiheadAttentionOptions o) : options(o) {
  const std::int64_t E = o.embed_dim, H = o.num_heads;
  if (E <= 0 || H <= 0)
    throw ValueError(str("MultiheadAttention: embed_dim and num_heads must be greater than 0, got embed_dim=", E,
                         " and num_heads=", H, " instead"));
  if (E % H != 0) throw ValueError(str("MultiheadAttention: embed_dim must be divisible by num_heads, got ", E, " and ", H));
  if (o.add_bias_kv || o.add_zero_attn)
    throw ValueError("MultiheadAttention: add_bias_kv and add_zero_attn are not supported");
  if (!(o.dropout >= 0.0 && o.dropout <= 1.0))
    throw ValueError(str("MultiheadAttention: dropout must be in [0, 1], got ", o.dropout));
  const std::int64_t kdim = o.kdim.value_or(E), vdim = o.vdim.value_or(E);
  if (kdim <= 0 || vdim <= 0)
    throw ValueError(str("MultiheadAttention: kdim and vdim must be greater than 0, got ", kdim, " and ", vdim));
  if (kdim == E && vdim == E) {
    in_proj_weight = register_parameter("in_proj_weight", xavier_uniform(3 * E, E));
  } else {
    q_proj_weight = register_parameter("q_proj_weight", xavier_uniform(E, E));
    k_proj_weight = register_parameter("k_proj_weight", xavier_uniform(E, kdim));
    v_proj_weight = register_parameter("v_proj_weight", xavier_uniform(E, vdim));
  }
  if (o.bias) in_proj_bias = register_parameter("in_proj_bias", zeros({3 * E}));
  out_proj = register_module("out_proj", std::make_shared<Linear>(E, E, o.bias));
  if (o.bias) out_proj->bias.detach().zero_();  // torch keeps Linear's weight, zeroes the bias
}

functional::MultiheadAttentionOutput MultiheadAttention::forward(const Tensor& query, const Tensor& key,
                                                                 const Tensor& value, const Tensor& key_padding_mask,
                                                                 bool need_weights, const Tensor& attn_mask,
                                                                 bool average_attn_weights, bool is_causal) {
  return functional::multi_head_attention_forward(
      query, key, value,
      {.embed_dim_to_check = options.embed_dim,
       .num_heads = options.num_heads,
       .in_proj_weight = in_proj_weight,
       .in_proj_bias = in_proj_bias,
       .out_proj_weight = out_proj->weight,
       .out_proj_bias = out_proj->bias,
       .dropout_p = options.dropout,
       .training = is_training(),
       .key_padding_mask = key_padding_mask,
       .need_weights = need_weights,
       .attn_mask = attn_mask,
       .use_separate_proj_weight = !qkv_same_embed_dim(),
       .q_proj_weight = q_proj_weight,
       .k_proj_weight = k_proj_weight,
       .v_proj_weight = v_proj_weight,
       .average_attn_weights = average_attn_weights,
       .is_causal = is_causal,
       .batch_first = options.batch_first});
}

TransformerEncoderLayer::TransformerEncoderLayer(TransformerEncoderLayerOptions o) : options(std::move(o)) {
  const auto& op = options;
  if (op.activation != "relu" && op.activation != "gelu")
    throw ValueError(str("TransformerEncoderLayer: activation should be relu/gelu, not ", op.activation));
  if (op.dim_feedforward <= 0)
    throw ValueError(str("TransformerEncoderLayer: dim_feedforward must be greater than 0, got ", op.dim_feedforward));
  self_attn = register_module("self_attn", std::make_shared<MultiheadAttention>(MultiheadAttentionOptions{
                                               .embed_dim = op.d_model,
                                               .num_heads = op.nhead,
                                               .dropout = op.dropout,
                                               .bias = op.bias,
                                               .batch_first = op.batch_first}));
  linear1 = register_module("linear1", std::make_shared<Linear>(op.d_model, op.dim_feedforward, op.bias));
  dropout = register_module("dropout", std::make_shared<Dropout>(op.dropout));
  linear2 = register_module("linear2", std::make_shared<Linear>(op.dim_feedforward, op.d_model, op.bias));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(Shape{op.d_model}, op.layer_norm_eps, true, op.bias));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(Shape{op.d_model}, op.layer_norm_eps, true, op.bias));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(op.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(op.dropout));
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask,
                                        bool is_causal) {
  const auto attention_block = [&](const Tensor& x) {
    return dropout1->forward(
        self_attn->forward(x, x, x, src_key_padding_mask, /*need_weights=*/false, src_mask, true, is_causal).output);
  };
  const auto feed_forward_block = [&](const Tensor& x) {
    const Tensor hidden = linear1->forward(x);
    return dropout2->forward(linear2->forward(dropout->forward(options.activation == "gelu" ? gelu(hidden) : relu(hidden))));
  };
  if (options.norm_first) {
    const Tensor x = add(src, attention_block(norm1->forward(src)));
    return add(x, feed_forward_block(norm2->forward(x)));
  }
  const Tensor x = norm1->forward(add(src, attention_block(src)));
  return norm2->forward(add(x, feed_forward_block(x)));
}

TransformerEncoder::TransformerEncoder(const TransformerEncoderLayer& encoder_layer, std::int64_t count,
                                       std::shared_ptr<Module> final_norm)
    : num_layers(count) {
  if (count < 0) throw ValueError(str("TransformerEncoder: num_layers must be at least 0, got ", count));
  layers = register_module("layers", std::make_shared<ModuleList<TransformerEncoderLayer>>());
  const StateDict state = encoder_layer.state_dict();
  for (std::int64_t i = 0; i < count; ++i) {
    auto layer = std::make_shared<TransformerEncoderLayer>(encoder_layer.options);
    layer->load_state_dict(state);
    layer->train(encoder_layer.is_training());
    layers->push_back(std::move(layer));
  }
  if (final_norm) norm = register_module("norm", std::move(final_norm));
}

Tensor TransformerEncoder::forward(const Tensor& src, const Tensor& mask, const Tensor& src_key_padding_mask,
                                   std::optional<bool> is_causal) {
  if (src.dim() != 2 && src.dim() != 3)
    throw ValueError(str("TransformerEncoder: src must be 2-D (unbatched) or 3-D, got ", src.dim(), "-D"));
  const bool batch_first = layers->size() > 0 && (*layers)[0].options.batch_first;
  const std::int64_t length = src.dim() == 2 ? src.size(0) : src.size(batch_first ? 1 : 0);
  const bool causal = detect_is_causal_mask(mask, is_causal, length);
  Tensor output = src;
  for (const auto& layer : *layers) output = layer->forward(output, mask, src_key_padding_mask, causal);
  return norm ? norm->forward(output) : output;
}

Tensor generate_square_subsequent_mask(std::int64_t size, DType dtype) {
  if (size < 0) throw ValueError(str("generate_square_subsequent_mask: size must be at least 0, got ", size));
  return triu(full({size, size}, -std::numeric_limits<double>::infinity(), dtype), 1);
}

bool detect_is_causal_mask(const Tensor& mask, std::optional<bool> is_causal, std::int64_t size) {
  if (is_causal || !mask.defined()) return is_causal.value_or(false);
  if (mask.shape() != Shape{size, size}) return false;
  const Tensor additive = functional::canonical_mask(mask, DType::F32, "mask").to(DType::F32);
  return all(eq(additive, generate_square_subsequent_mask(size))).item<bool>();
}

}  // namespace kael::nn
