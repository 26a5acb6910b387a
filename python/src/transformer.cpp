// kael.nn's attention, native half: multi_head_attention_forward with torch's signature
// (kael.nn.functional re-exports it; kael.nn.MultiheadAttention's forward is this call), the
// C++ MultiheadAttention whose initialized parameters python/kael/nn/transformer.py takes, and
// the causal-mask helpers its TransformerEncoder uses.
#include <pybind11/stl.h>

#include <optional>

#include "bindings.hpp"
#include "convert.hpp"
#include "kael/core/error.hpp"
#include "kael/nn/multi_head_attention.hpp"
#include "kael/nn/transformer.hpp"

namespace py = pybind11;

namespace kael::python {

void init_transformer(py::module_& m) {
  m.def(
      "multi_head_attention_forward",
      [](const Tensor& query, const Tensor& key, const Tensor& value, std::int64_t embed_dim_to_check,
         std::int64_t num_heads, const std::optional<Tensor>& in_proj_weight, const std::optional<Tensor>& in_proj_bias,
         const py::object& bias_k, const py::object& bias_v, bool add_zero_attn, double dropout_p,
         const Tensor& out_proj_weight, const std::optional<Tensor>& out_proj_bias, bool training,
         const std::optional<Tensor>& key_padding_mask, bool need_weights, const std::optional<Tensor>& attn_mask,
         bool use_separate_proj_weight, const std::optional<Tensor>& q_proj_weight,
         const std::optional<Tensor>& k_proj_weight, const std::optional<Tensor>& v_proj_weight,
         const py::object& static_k, const py::object& static_v, bool average_attn_weights, bool is_causal,
         bool batch_first) {
        if (!bias_k.is_none() || !bias_v.is_none() || add_zero_attn)
          throw ValueError("multi_head_attention_forward: bias_k, bias_v and add_zero_attn are not supported");
        if (!static_k.is_none() || !static_v.is_none())
          throw ValueError("multi_head_attention_forward: static_k and static_v are not supported");
        const auto result = nn::functional::multi_head_attention_forward(
            query, key, value,
            {.embed_dim_to_check = embed_dim_to_check,
             .num_heads = num_heads,
             .in_proj_weight = tensor_or_undefined(in_proj_weight),
             .in_proj_bias = tensor_or_undefined(in_proj_bias),
             .out_proj_weight = out_proj_weight,
             .out_proj_bias = tensor_or_undefined(out_proj_bias),
             .dropout_p = dropout_p,
             .training = training,
             .key_padding_mask = tensor_or_undefined(key_padding_mask),
             .need_weights = need_weights,
             .attn_mask = tensor_or_undefined(attn_mask),
             .use_separate_proj_weight = use_separate_proj_weight,
             .q_proj_weight = tensor_or_undefined(q_proj_weight),
             .k_proj_weight = tensor_or_undefined(k_proj_weight),
             .v_proj_weight = tensor_or_undefined(v_proj_weight),
             .average_attn_weights = average_attn_weights,
             .is_causal = is_causal,
             .batch_first = batch_first});
        return py::make_tuple(result.output, tensor_or_none(result.weights));
      },
      "query"_a, "key"_a, "value"_a, "embed_dim_to_check"_a, "num_heads"_a, "in_proj_weight"_a, "in_proj_bias"_a,
      "bias_k"_a, "bias_v"_a, "add_zero_attn"_a, "dropout_p"_a, "out_proj_weight"_a, "out_proj_bias"_a,
      "training"_a = true, "key_padding_mask"_a = py::none(), "need_weights"_a = true, "attn_mask"_a = py::none(),
      "use_separate_proj_weight"_a = false, "q_proj_weight"_a = py::none(), "k_proj_weight"_a = py::none(),
      "v_proj_weight"_a = py::none(), "static_k"_a = py::none(), "static_v"_a = py::none(),
      "average_attn_weights"_a = true, "is_causal"_a = false, py::kw_only(), "batch_first"_a = false,
      "torch.nn.functional.multi_head_attention_forward: (attn_output, attn_weights or None); query (L, N, E) "
      "(or (N, L, E) with kael's batch_first=True, (L, E) unbatched). A boolean mask is True where attention is "
      "not allowed, a float one is added to the scores.");

  py::class_<nn::MultiheadAttention, nn::Module, std::shared_ptr<nn::MultiheadAttention>>(m, "_MultiheadAttention")
      .def(py::init([](std::int64_t embed_dim, std::int64_t num_heads, double dropout, bool bias, bool add_bias_kv,
                       bool add_zero_attn, std::optional<std::int64_t> kdim, std::optional<std::int64_t> vdim,
                       bool batch_first) {
             return std::make_shared<nn::MultiheadAttention>(nn::MultiheadAttentionOptions{
                 .embed_dim = embed_dim,
                 .num_heads = num_heads,
                 .dropout = dropout,
                 .bias = bias,
                 .add_bias_kv = add_bias_kv,
                 .add_zero_attn = add_zero_attn,
                 .kdim = kdim,
                 .vdim = vdim,
                 .batch_first = batch_first});
           }),
           "embed_dim"_a, "num_heads"_a, "dropout"_a = 0.0, "bias"_a = true, "add_bias_kv"_a = false,
           "add_zero_attn"_a = false, "kdim"_a = py::none(), "vdim"_a = py::none(), "batch_first"_a = false);

  m.def(
      "generate_square_subsequent_mask",
      [](std::int64_t size, const py::object& dtype) {
        return nn::generate_square_subsequent_mask(size, dtype_arg(dtype, default_float_dtype()));
      },
      "size"_a, "dtype"_a = py::none(), "(size, size): 0 on and below the diagonal, -inf above (torch's causal mask).");
  m.def(
      "_detect_is_causal_mask",
      [](const std::optional<Tensor>& mask, std::optional<bool> is_causal, std::int64_t size) {
        return nn::detect_is_causal_mask(tensor_or_undefined(mask), is_causal, size);
      },
      "mask"_a, "is_causal"_a, "size"_a);
}

}  // namespace kael::python
