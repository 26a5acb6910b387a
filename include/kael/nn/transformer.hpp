// torch.nn's MultiheadAttention, TransformerEncoderLayer and TransformerEncoder in kael::nn:
// the same parameters, names, shapes and initialization, options named as torch's C++
// frontend's. The attention's forward is nn/multi_head_attention.hpp's function (which
// kael.nn.MultiheadAttention in Python calls too).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "kael/nn/layers.hpp"
#include "kael/nn/module.hpp"
#include "kael/nn/multi_head_attention.hpp"

namespace kael::nn {

struct MultiheadAttentionOptions {
  std::int64_t embed_dim = 0;
  std::int64_t num_heads = 1;
  double dropout = 0.0;  // on the attention weights, in training mode
  bool bias = true;
  bool add_bias_kv = false;    // not supported: true is a ValueError
  bool add_zero_attn = false;  // not supported: true is a ValueError
  std::optional<std::int64_t> kdim{}, vdim{};  // the key's and value's features; embed_dim when absent
  bool batch_first = false;                // (N, L, E) rather than (L, N, E)
};

// Parameters as torch's: in_proj_weight (3E, E) Xavier-uniform, or q_proj_weight (E, E),
// k_proj_weight (E, kdim), v_proj_weight (E, vdim) when kdim or vdim differ from E; in_proj_bias
// (3E) zeros; out_proj a Linear(E, E) whose bias starts at zero.
class MultiheadAttention : public Module {
 public:
  explicit MultiheadAttention(MultiheadAttentionOptions options);
  MultiheadAttention(std::int64_t embed_dim, std::int64_t num_heads)
      : MultiheadAttention(MultiheadAttentionOptions{.embed_dim = embed_dim, .num_heads = num_heads}) {}
  // torch's forward: (output, weights), the masks as multi_head_attention_forward takes them.
  functional::MultiheadAttentionOutput forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                               const Tensor& key_padding_mask = Tensor(), bool need_weights = true,
                                               const Tensor& attn_mask = Tensor(), bool average_attn_weights = true,
                                               bool is_causal = false);
  std::string name() const override { return "MultiheadAttention"; }
  // True when in_proj_weight is used (kdim == vdim == embed_dim).
  bool qkv_same_embed_dim() const { return in_proj_weight.defined(); }

  MultiheadAttentionOptions options;
  Tensor in_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight, in_proj_bias;  // undefined when absent
  std::shared_ptr<Linear> out_proj;
};

struct TransformerEncoderLayerOptions {
  std::int64_t d_model = 0;
  std::int64_t nhead = 1;
  std::int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  std::string activation = "relu";  // "relu" or "gelu" (the erf form)
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;  // layer norms before the attention and feed-forward blocks, not after
  bool bias = true;         // of the linear layers and the layer norms
};

// x + self_attn(x) and x + linear2(dropout(activation(linear1(x)))), each followed by a layer
// norm (or preceded, with norm_first), dropout as torch's; children in torch's order.
class TransformerEncoderLayer : public Module {
 public:
  explicit TransformerEncoderLayer(TransformerEncoderLayerOptions options);
  TransformerEncoderLayer(std::int64_t d_model, std::int64_t nhead)
      : TransformerEncoderLayer(TransformerEncoderLayerOptions{.d_model = d_model, .nhead = nhead}) {}
  Tensor forward(const Tensor& src) override { return forward(src, Tensor()); }
  // src_mask and src_key_padding_mask as MultiheadAttention's attn_mask and key_padding_mask.
  Tensor forward(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask = Tensor(),
                 bool is_causal = false);
  std::string name() const override { return "TransformerEncoderLayer"; }

  TransformerEncoderLayerOptions options;
  std::shared_ptr<MultiheadAttention> self_attn;
  std::shared_ptr<Linear> linear1;
  std::shared_ptr<Dropout> dropout;
  std::shared_ptr<Linear> linear2;
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::shared_ptr<Dropout> dropout1, dropout2;
};

// num_layers copies of encoder_layer (its options, parameter values and mode: torch's deepcopy)
// named layers.0, layers.1, ..., then `norm` when given.
class TransformerEncoder : public Module {
 public:
  TransformerEncoder(const TransformerEncoderLayer& encoder_layer, std::int64_t num_layers,
                     std::shared_ptr<Module> norm = nullptr);
  Tensor forward(const Tensor& src) override { return forward(src, Tensor()); }
  // is_causal absent: whether mask is the causal mask (torch's _detect_is_causal_mask).
  Tensor forward(const Tensor& src, const Tensor& mask, const Tensor& src_key_padding_mask = Tensor(),
                 std::optional<bool> is_causal = std::nullopt);
  std::string name() const override { return "TransformerEncoder"; }

  std::shared_ptr<ModuleList<TransformerEncoderLayer>> layers;
  std::shared_ptr<Module> norm;  // null without one
  std::int64_t num_layers;
};

// (size, size): 0 on and below the diagonal, -inf above (torch's causal mask).
Tensor generate_square_subsequent_mask(std::int64_t size, DType dtype = DType::F32);
// torch's _detect_is_causal_mask: is_causal when given, else whether mask (BOOL or floating) is
// the causal mask of `size`.
bool detect_is_causal_mask(const Tensor& mask, std::optional<bool> is_causal, std::int64_t size);

}  // namespace kael::nn
