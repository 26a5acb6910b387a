#include "model/forward.hpp"

#include "kernels/attention.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/gemm.hpp"
#include "kernels/linear.hpp"
#include "kernels/norm.hpp"
#include "kernels/quant.hpp"
#include "model/profile.hpp"

namespace kael::model {
namespace {

namespace k = kael::kernels;
using k::Epilogue;

// x += attn(ln(x)) for T new positions starting at pos0 of layer `layer`; ln holds ln_1(x).
void attention_block(const Config& config, const LayerWeights& w, Session::State& s, int layer, std::int64_t T,
                     std::int64_t pos0) {
  const std::int64_t C = config.n_embd, NH = config.n_head, D = config.head_dim();
  const std::int64_t capacity = k::kv_capacity(config.n_positions);
  const std::int64_t layer_floats = k::kv_layer_floats(NH, D, config.n_positions);
  float* k_layer = s.k_cache.get() + layer * layer_floats;
  float* v_layer = s.v_cache.get() + layer * layer_floats;
  k::linear_matrix(s.qkv.get(), s.ln.get(), w.qkv, w.qkv_bias, T, C, 3 * C);  // (T, 3C)
  for (std::int64_t t = 0; t < T; ++t) {
    const float* row = s.qkv.get() + t * 3 * C;  // q, k, v
    k::kv_store(k_layer, v_layer, row + C, row + 2 * C, pos0 + t, NH, D, capacity);
  }
  k::cached_attention(s.att.get(), s.scores.get(), s.qkv.get(), 3 * C, k_layer, v_layer, T, pos0, NH, D,
                      capacity);  // (T, C)
  // The projection adds itself to the residual stream: no separate pass over x.
  k::linear_matrix(s.x.get(), s.att.get(), w.attn_proj, w.attn_proj_bias, T, C, C, Epilogue::residual);
}

// x += mlp(ln(x)): C -> H with GELU (fused into the first product) -> C, added to x.
void mlp_block(const Config& config, const LayerWeights& w, float* x, const float* ln, float* fc, std::int64_t T) {
  const std::int64_t C = config.n_embd, H = config.mlp_dim();
  k::linear_matrix(fc, ln, w.fc, w.fc_bias, T, C, H, Epilogue::gelu);                 // (T, H)
  k::linear_matrix(x, fc, w.mlp_proj, w.mlp_proj_bias, T, H, C, Epilogue::residual);  // (T, C)
}

}  // namespace

void forward_chunk(const Config& config, const Weights& weights, Session::State& state, const std::int32_t* tokens,
                   std::int64_t T, bool want_logits, float* all_logits) {
  const std::int64_t C = config.n_embd, pos0 = state.length;
  const float eps = config.layer_norm_epsilon;
  PartTimer timer(state.profile);
  embed(state.x.get(), weights, config, tokens, T, pos0);  // (T, C)
  timer.skip();  // the embedding counts as "other"
  for (int layer = 0; layer < config.n_layer; ++layer) {
    const LayerWeights& w = weights.layers[static_cast<std::size_t>(layer)];
    k::layernorm(state.ln.get(), state.x.get(), w.ln_1_weight, w.ln_1_bias, T, C, eps);  // (T, C)
    timer.lap(&ForwardProfile::layernorm_ms);
    attention_block(config, w, state, layer, T, pos0);
    timer.lap(&ForwardProfile::attention_ms);
    k::layernorm(state.ln.get(), state.x.get(), w.ln_2_weight, w.ln_2_bias, T, C, eps);  // (T, C)
    timer.lap(&ForwardProfile::layernorm_ms);
    mlp_block(config, w, state.x.get(), state.ln.get(), state.fc.get(), T);
    timer.lap(&ForwardProfile::mlp_ms);
  }
  state.length += static_cast<int>(T);
  if (all_logits) {
    // all_logits (T, V) = ln_f(x) @ head^T: a whole text scored in one pass.
    k::layernorm(state.ln.get(), state.x.get(), weights.ln_f_weight, weights.ln_f_bias, T, C, eps);  // (T, C)
    timer.lap(&ForwardProfile::layernorm_ms);
    k::linear_matrix(all_logits, state.ln.get(), weights.head, nullptr, T, C, config.vocab_size);  // (T, V)
    timer.lap(&ForwardProfile::logits_ms);
  } else if (want_logits) {
    // logits (V) = ln_f(x[last]) @ head^T: decoding needs only the last position.
    k::layernorm(state.ln.get(), state.x.get() + (T - 1) * C, weights.ln_f_weight, weights.ln_f_bias, 1, C, eps);
    timer.lap(&ForwardProfile::layernorm_ms);
    k::linear_matrix(state.logits.get(), state.ln.get(), weights.head, nullptr, 1, C, config.vocab_size);  // (V)
    timer.lap(&ForwardProfile::logits_ms);
  }
  timer.finish();
}

}  // namespace kael::model
