// multi_head_attention_forward (nn/multi_head_attention.hpp), step by step as torch's
// F.multi_head_attention_forward: shape checks, masks made additive and merged, the input
// projections, attention per head, the output projection.
#include "kael/nn/multi_head_attention.hpp"

#include <cmath>
#include <limits>

#include "kael/core/error.hpp"
#include "kael/tensor/ops.hpp"

namespace kael::nn::functional {

namespace {

// Python's `a is b` for tensor handles: the same values, view and autograd history. Only then
// may one product serve both (the gradient reaches every handle), as torch's `query is key`.
bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.autograd_meta() == b.autograd_meta() && a.device_raw_data() == b.device_raw_data() &&
         a.dtype() == b.dtype() && a.shape() == b.shape() && a.strides() == b.strides();
}

// Applies `change` to query, key and value, keeping whichever of them were one tensor one
// tensor, so self-attention is still recognized after a transpose or unsqueeze.
template <class Change>
void change_all(Tensor& query, Tensor& key, Tensor& value, Change change) {
  const bool key_is_query = same_tensor(key, query), value_is_key = same_tensor(value, key);
  query = change(query);
  key = key_is_query ? query : change(key);
  value = value_is_key ? key : change(value);
}

void check_shape(const Tensor& t, const Shape& expected, const char* name) {
  if (!t.defined()) throw ValueError(str("multi_head_attention_forward: ", name, " is required"));
  if (t.shape() != expected)
    throw ValueError(str("multi_head_attention_forward: ", name, " has shape ", shape_to_string(t.shape()),
                         ", but should be ", shape_to_string(expected)));
}

void check_optional_shape(const Tensor& t, const Shape& expected, const char* name) {
  if (t.defined()) check_shape(t, expected, name);
}

// torch's _mha_shape_check: query 3-D (batched) or 2-D, key and value alike, masks of the
// matching ranks.
void check_ranks(const Tensor& query, const Tensor& key, const Tensor& value, const MultiheadAttentionForwardOptions& o) {
  const int d = query.dim();
  if (d != 2 && d != 3)
    throw ValueError(str("multi_head_attention_forward: query should be unbatched 2D or batched 3D tensor but "
                         "received ", d, "-D query tensor"));
  const char* kind = d == 3 ? "batched (3-D)" : "unbatched (2-D)";
  if (key.dim() != d || value.dim() != d)
    throw ValueError(str("multi_head_attention_forward: for ", kind, " query, expected key and value to be ", d,
                         "-D but found ", key.dim(), "-D and ", value.dim(), "-D tensors respectively"));
  if (o.key_padding_mask.defined() && o.key_padding_mask.dim() != d - 1)
    throw ValueError(str("multi_head_attention_forward: for ", kind, " query, expected key_padding_mask to be None or ",
                         d - 1, "-D but found ", o.key_padding_mask.dim(), "-D tensor instead"));
  if (o.attn_mask.defined() && o.attn_mask.dim() != 2 && o.attn_mask.dim() != 3)
    throw ValueError(str("multi_head_attention_forward: expected attn_mask to be None, 2-D or 3-D but found ",
                         o.attn_mask.dim(), "-D tensor instead"));
}

struct Projected {
  Tensor q, k, v;
};

// The input projections: one product for self-attention, two when key is value, else three.
Projected project(const Tensor& query, const Tensor& key, const Tensor& value,
                  const MultiheadAttentionForwardOptions& o, std::int64_t E) {
  const Tensor& b = o.in_proj_bias;
  const auto bias = [&](std::int64_t part, std::int64_t parts = 1) {
    return b.defined() ? b.slice(0, part * E, (part + parts) * E) : Tensor();
  };
  if (o.use_separate_proj_weight)
    return {linear(query, o.q_proj_weight, bias(0)), linear(key, o.k_proj_weight, bias(1)),
            linear(value, o.v_proj_weight, bias(2))};
  const Tensor& w = o.in_proj_weight;
  if (same_tensor(query, key) && same_tensor(key, value)) {
    const auto qkv = chunk(linear(query, w, b), 3, -1);
    return {qkv[0], qkv[1], qkv[2]};
  }
  const Tensor q = linear(query, w.slice(0, 0, E), bias(0));
  if (same_tensor(key, value)) {
    const auto kv = chunk(linear(key, w.slice(0, E, 3 * E), bias(1, 2)), 2, -1);
    return {q, kv[0], kv[1]};
  }
  return {q, linear(key, w.slice(0, E, 2 * E), bias(1)), linear(value, w.slice(0, 2 * E, 3 * E), bias(2))};
}

}  // namespace

Tensor canonical_mask(const Tensor& mask, DType dtype, const char* name) {
  if (!mask.defined()) return mask;
  if (mask.dtype() == DType::BOOL)
    return masked_fill(zeros(mask.shape(), dtype), mask, -std::numeric_limits<double>::infinity());
  if (!is_floating(mask.dtype()))
    throw TypeError(str("only bool and floating types of ", name, " are supported, got ", dtype_name(mask.dtype())));
  return mask;
}

MultiheadAttentionOutput multi_head_attention_forward(const Tensor& query_in, const Tensor& key_in,
                                                      const Tensor& value_in, const MultiheadAttentionForwardOptions& o) {
  check_ranks(query_in, key_in, value_in, o);
  const bool batched = query_in.dim() == 3;
  Tensor query = query_in, key = key_in, value = value_in, key_padding_mask = o.key_padding_mask;
  if (batched && o.batch_first) change_all(query, key, value, [](const Tensor& t) { return t.transpose(0, 1); });
  if (!batched) {
    change_all(query, key, value, [](const Tensor& t) { return t.unsqueeze(1); });
    if (key_padding_mask.defined()) key_padding_mask = key_padding_mask.unsqueeze(0);
  }
  const std::int64_t L = query.size(0), N = query.size(1), E = query.size(2), S = key.size(0), H = o.num_heads;
  if (E != o.embed_dim_to_check)
    throw ValueError(str("multi_head_attention_forward: was expecting embedding dimension of ", o.embed_dim_to_check,
                         ", but got ", E));
  if (H <= 0 || E % H != 0)
    throw ValueError(str("multi_head_attention_forward: embed_dim ", E, " not divisible by num_heads ", H));
  if (key.size(1) != N || value.size(0) != S || value.size(1) != N)
    throw ValueError(str("multi_head_attention_forward: key ", shape_to_string(key_in.shape()), " and value ",
                         shape_to_string(value_in.shape()), " must match query's batch ", N,
                         " and each other's length"));
  if (o.is_causal && !o.attn_mask.defined())
    throw ValueError("Need attn_mask if specifying the is_causal hint (torch's rule); "
                     "generate_square_subsequent_mask(L) makes one");
  if (o.use_separate_proj_weight) {
    check_shape(o.q_proj_weight, {E, E}, "q_proj_weight");
    check_shape(o.k_proj_weight, {E, key.size(2)}, "k_proj_weight");
    check_shape(o.v_proj_weight, {E, value.size(2)}, "v_proj_weight");
  } else {
    check_shape(o.in_proj_weight, {3 * E, E}, "in_proj_weight");
    if (key.size(2) != E || value.size(2) != E)
      throw ValueError(str("multi_head_attention_forward: key and value must have query's embedding dimension ", E,
                           " unless use_separate_proj_weight, got ", key.size(2), " and ", value.size(2)));
  }
  check_optional_shape(o.in_proj_bias, {3 * E}, "in_proj_bias");
  check_shape(o.out_proj_weight, {E, E}, "out_proj_weight");
  check_optional_shape(o.out_proj_bias, {E}, "out_proj_bias");

  // The masks as one additive bias that broadcasts to (N, H, L, S).
  Tensor bias = canonical_mask(o.attn_mask, query.dtype(), "attn_mask");
  if (bias.defined()) {
    const Shape expected = bias.dim() == 2 ? Shape{L, S} : Shape{N * H, L, S};
    if (bias.shape() != expected)
      throw ValueError(str("attn_mask has shape ", shape_to_string(bias.shape()), ", but should be ",
                           shape_to_string({L, S}), " or ", shape_to_string({N * H, L, S})));
    bias = bias.dim() == 2 ? bias.reshape({1, 1, L, S}) : bias.reshape({N, H, L, S});
  }
  Tensor padding = canonical_mask(key_padding_mask, query.dtype(), "key_padding_mask");
  if (padding.defined()) {
    if (padding.shape() != Shape{N, S})
      throw ValueError(str("key_padding_mask has shape ", shape_to_string(o.key_padding_mask.shape()),
                           ", but should be ", shape_to_string(batched ? Shape{N, S} : Shape{S})));
    padding = padding.reshape({N, 1, 1, S});
    bias = bias.defined() ? add(bias, padding) : padding;
  }

  const std::int64_t D = E / H;
  const auto [q_flat, k_flat, v_flat] = project(query, key, value, o, E);  // (L, N, E), (S, N, E), (S, N, E)
  const Tensor q = q_flat.reshape({L, N, H, D}).permute({1, 2, 0, 3});  // (N, H, L, D)
  const Tensor k = k_flat.reshape({S, N, H, D}).permute({1, 2, 0, 3});
  const Tensor v = v_flat.reshape({S, N, H, D}).permute({1, 2, 0, 3});
  const double dropout_p = o.training ? o.dropout_p : 0.0;
  Tensor attended, weights;
  if (o.need_weights) {  // the weights themselves are wanted: softmax spelled out, as torch's
    Tensor scores = matmul(mul(q, std::sqrt(1.0 / static_cast<double>(D))), k.transpose(2, 3));  // (N, H, L, S)
    if (bias.defined()) scores = add(scores, bias);
    weights = softmax(scores, -1);
    if (dropout_p > 0.0) weights = dropout(weights, dropout_p, true);
    attended = matmul(weights, v);
  } else if (!bias.defined()) {
    attended = scaled_dot_product_attention(q, k, v, false, Tensor(), std::nullopt, dropout_p);
  } else if (o.is_causal && !key_padding_mask.defined()) {  // the hint: attn_mask is the causal mask
    attended = scaled_dot_product_attention(q, k, v, true, Tensor(), std::nullopt, dropout_p);
  } else {
    attended = scaled_dot_product_attention(q, k, v, false, bias.expand({N, H, L, S}), std::nullopt, dropout_p);
  }
  Tensor output = linear(attended.permute({2, 0, 1, 3}).reshape({L, N, E}), o.out_proj_weight, o.out_proj_bias);
  if (weights.defined() && o.average_attn_weights) weights = mean(weights, {1});  // (N, L, S)
  if (!batched) {
    output = output.squeeze(1);
    if (weights.defined()) weights = weights.squeeze(0);
  } else if (o.batch_first) {
    output = output.transpose(0, 1);
  }
  return {output, weights};
}

}  // namespace kael::nn::functional
