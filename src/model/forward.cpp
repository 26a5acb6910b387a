#include "model/forward.hpp"

#include <cstring>

#include "kernels/attention.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/linear.hpp"
#include "kernels/norm.hpp"

namespace kael::model {
namespace {

namespace k = kael::kernels;

// x += attn(ln_1(x)) for T new positions starting at pos0 of layer `layer`.
void attention_block(const Config& config, const LayerWeights& w, Session::State& s, int layer, std::int64_t T,
                     std::int64_t pos0) {
  const std::int64_t C = config.n_embd, P = config.n_positions;
  k::layernorm(s.ln.get(), s.x.get(), w.ln_1_weight, w.ln_1_bias, T, C, config.layer_norm_epsilon);  // (T, C)
  k::linear(s.qkv.get(), s.ln.get(), w.qkv_weight, w.qkv_bias, T, C, 3 * C);                         // (T, 3C)

  // Append this chunk's keys and values to the cache, laid out (layer, position, C).
  float* k_cache = s.k_cache.get() + layer * P * C;  // (P, C)
  float* v_cache = s.v_cache.get() + layer * P * C;  // (P, C)
  for (std::int64_t t = 0; t < T; ++t) {
    const float* row = s.qkv.get() + t * 3 * C;
    std::memcpy(k_cache + (pos0 + t) * C, row + C, static_cast<std::size_t>(C) * sizeof(float));
    std::memcpy(v_cache + (pos0 + t) * C, row + 2 * C, static_cast<std::size_t>(C) * sizeof(float));
  }
  k::causal_attention(s.att.get(), s.scores.get(), s.qkv.get(), k_cache, v_cache, T, pos0, config.n_head,
                      config.head_dim(), 3 * C, C);                                          // (T, C)
  k::linear(s.proj.get(), s.att.get(), w.attn_proj_weight, w.attn_proj_bias, T, C, C);       // (T, C)
  k::add_inplace(s.x.get(), s.proj.get(), T * C);
}

// x += mlp(ln_2(x)): C -> H with GELU -> C.
void mlp_block(const Config& config, const LayerWeights& w, Session::State& s, std::int64_t T) {
  const std::int64_t C = config.n_embd, H = config.mlp_dim();
  k::layernorm(s.ln.get(), s.x.get(), w.ln_2_weight, w.ln_2_bias, T, C, config.layer_norm_epsilon);  // (T, C)
  k::linear(s.fc.get(), s.ln.get(), w.fc_weight, w.fc_bias, T, C, H);                               // (T, H)
  k::gelu_new(s.fc.get(), s.fc.get(), T * H);
  k::linear(s.proj.get(), s.fc.get(), w.mlp_proj_weight, w.mlp_proj_bias, T, H, C);  // (T, C)
  k::add_inplace(s.x.get(), s.proj.get(), T * C);
}

// logits (V) = ln_f(x[last]) @ head^T: only the last position is ever needed.
void output_head(const Config& config, const Weights& w, Session::State& s, std::int64_t T) {
  const std::int64_t C = config.n_embd;
  const float* last = s.x.get() + (T - 1) * C;  // (C)
  k::layernorm(s.ln.get(), last, w.ln_f_weight, w.ln_f_bias, 1, C, config.layer_norm_epsilon);
  k::linear_nt(s.logits.get(), s.ln.get(), w.lm_head, 1, C, config.vocab_size);  // (V)
}

}  // namespace

void forward_chunk(const Config& config, const Weights& weights, Session::State& state, const std::int32_t* tokens,
                   std::int64_t T, bool want_logits) {
  const std::int64_t pos0 = state.length;
  k::embedding(state.x.get(), tokens, weights.wte, weights.wpe, T, config.n_embd, pos0);  // (T, C)
  for (int layer = 0; layer < config.n_layer; ++layer) {
    const LayerWeights& w = weights.layers[static_cast<std::size_t>(layer)];
    attention_block(config, w, state, layer, T, pos0);
    mlp_block(config, w, state, T);
  }
  state.length += static_cast<int>(T);
  if (want_logits) output_head(config, weights, state, T);
}

}  // namespace kael::model
