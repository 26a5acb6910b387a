// torch.nn.functional.multi_head_attention_forward: the one forward of nn::MultiheadAttention
// (C++) and of kael.nn.MultiheadAttention (Python, which binds it as
// kael.nn.functional.multi_head_attention_forward). It is composed of the tensor library's
// linear, matmul, softmax, scaled_dot_product_attention and dropout, so the backward is theirs.
//
// Masks follow torch: a BOOL attn_mask or key_padding_mask is true where a position may NOT be
// attended (the opposite of scaled_dot_product_attention's), a floating one is added to the
// scores; attn_mask is (L, S) or (N * num_heads, L, S), key_padding_mask (N, S) ((S) and
// (num_heads, L, S) for unbatched input). Both given, they are added. add_bias_kv,
// add_zero_attn and static keys are not supported.
#pragma once

#include <cstdint>

#include "kael/core/tensor.hpp"

namespace kael::nn::functional {

// torch's arguments after query, key and value; the undefined Tensor stands for None.
struct MultiheadAttentionForwardOptions {
  std::int64_t embed_dim_to_check = 0;
  std::int64_t num_heads = 0;
  Tensor in_proj_weight{};   // (3 E, E), unless use_separate_proj_weight
  Tensor in_proj_bias{};     // (3 E) or undefined
  Tensor out_proj_weight{};  // (E, E)
  Tensor out_proj_bias{};    // (E) or undefined
  double dropout_p = 0.0;  // on the attention weights, while training
  bool training = true;
  Tensor key_padding_mask{};
  bool need_weights = true;
  Tensor attn_mask{};
  bool use_separate_proj_weight = false;  // q_proj_weight (E, E), k_proj_weight (E, kdim), v_proj_weight (E, vdim)
  Tensor q_proj_weight{}, k_proj_weight{}, v_proj_weight{};
  bool average_attn_weights = true;  // weights (N, L, S) averaged over heads, else (N, H, L, S)
  bool is_causal = false;            // a hint that attn_mask is the causal mask (which must be given)
  bool batch_first = false;          // kael's: query, key, value and output are (N, L, E), as the module's option
};

struct MultiheadAttentionOutput {
  Tensor output;   // (L, N, E), (N, L, E) when batch_first, (L, E) unbatched
  Tensor weights;  // undefined unless need_weights
};

// query (L, N, E), key (S, N, kdim), value (S, N, vdim), or 2-D without the batch. Bad shapes
// and options are ValueError, a mask of another dtype than BOOL or floating TypeError. When
// query, key and value are one tensor (self-attention) the input projection is one product.
MultiheadAttentionOutput multi_head_attention_forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                                      const MultiheadAttentionForwardOptions& options);

// torch's canonical mask: a BOOL mask (true = hidden) as 0 / -inf of `dtype`, a floating one as
// it is, an undefined one undefined; TypeError for other dtypes, naming the mask (`name`).
Tensor canonical_mask(const Tensor& mask, DType dtype, const char* name);

}  // namespace kael::nn::functional
