// One decode step for a batch of sequences: the products run on all B rows at once (each
// weight is read once per step instead of once per sequence), while the KV-cache update and
// attention use each sequence's own cache and position. Every row goes through the same
// kernels as forward_chunk with T = 1, so the results equal it bit for bit.
#include <algorithm>

#include "kernels/attention.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/gemm.hpp"
#include "kernels/linear.hpp"
#include "kernels/norm.hpp"
#include "kernels/quant.hpp"
#include "model/forward.hpp"
#include "model/profile.hpp"

namespace kael::model {
namespace {

namespace k = kael::kernels;
using k::Epilogue;

// out (B, C) = LayerNorm of each row of x (B, C).
void layernorm_rows(float* out, const float* x, const float* weight, const float* bias, std::int64_t B,
                    const Config& config) {
  k::layernorm(out, x, weight, bias, B, config.n_embd, config.layer_norm_epsilon);
}

// x += attn(ln) for every sequence: QKV for all rows, then each row's key and value into its
// own cache and its attention over that cache, then the output projection for all rows.
void attention_step(const Config& config, const LayerWeights& w, BatchWorkspace& ws, Session::State* const* states,
                    int layer, std::int64_t B) {
  const std::int64_t C = config.n_embd, NH = config.n_head, D = config.head_dim();
  const std::int64_t capacity = k::kv_capacity(config.n_positions);
  const std::int64_t layer_floats = k::kv_layer_floats(NH, D, config.n_positions);
  k::linear_matrix(ws.qkv.data(), ws.ln.data(), w.qkv, w.qkv_bias, B, C, 3 * C);  // (B, 3C)
  for (std::int64_t b = 0; b < B; ++b) {
    Session::State& s = *states[b];
    const float* row = ws.qkv.data() + b * 3 * C;  // q, k, v
    float* k_layer = s.k_cache.get() + layer * layer_floats;
    float* v_layer = s.v_cache.get() + layer * layer_floats;
    k::kv_store(k_layer, v_layer, row + C, row + 2 * C, s.length, NH, D, capacity);
    ws.rows[static_cast<std::size_t>(b)] = {ws.att.data() + b * C, row, k_layer, v_layer, s.length};
  }
  k::cached_attention_rows(ws.rows.data(), B, ws.scores.data(), config.n_positions, NH, D, capacity);  // (B, C)
  k::linear_matrix(ws.x.data(), ws.att.data(), w.attn_proj, w.attn_proj_bias, B, C, C, Epilogue::residual);
}

}  // namespace

void BatchWorkspace::reserve(const Config& config, std::int64_t batch) {
  if (batch <= capacity) return;
  const auto n = [batch](std::int64_t per_row) { return static_cast<std::size_t>(batch * per_row); };
  const std::int64_t C = config.n_embd;
  x.resize(n(C));
  ln.resize(n(C));
  qkv.resize(n(3 * C));
  att.resize(n(C));
  fc.resize(n(config.mlp_dim()));
  scores.resize(n(std::int64_t{config.n_head} * config.n_positions));
  logits.resize(n(config.vocab_size));
  rows.resize(static_cast<std::size_t>(batch));
  capacity = batch;
}

void forward_batch_step(const Config& config, const Weights& weights, BatchWorkspace& ws,
                        Session::State* const* states, const std::int32_t* tokens, std::int64_t B,
                        const std::vector<ForwardProfile*>& profiles) {
  const std::int64_t C = config.n_embd, H = config.mlp_dim(), V = config.vocab_size;
  ForwardProfile step;
  PartTimer timer(profiles.empty() ? nullptr : &step);
  for (std::int64_t b = 0; b < B; ++b)  // each row at its own position
    embed(ws.x.data() + b * C, weights, config, tokens + b, 1, states[b]->length);
  timer.skip();
  for (int layer = 0; layer < config.n_layer; ++layer) {
    const LayerWeights& w = weights.layers[static_cast<std::size_t>(layer)];
    layernorm_rows(ws.ln.data(), ws.x.data(), w.ln_1_weight, w.ln_1_bias, B, config);  // (B, C)
    timer.lap(&ForwardProfile::layernorm_ms);
    attention_step(config, w, ws, states, layer, B);
    timer.lap(&ForwardProfile::attention_ms);
    layernorm_rows(ws.ln.data(), ws.x.data(), w.ln_2_weight, w.ln_2_bias, B, config);  // (B, C)
    timer.lap(&ForwardProfile::layernorm_ms);
    k::linear_matrix(ws.fc.data(), ws.ln.data(), w.fc, w.fc_bias, B, C, H, Epilogue::gelu);  // (B, H)
    k::linear_matrix(ws.x.data(), ws.fc.data(), w.mlp_proj, w.mlp_proj_bias, B, H, C,
                     Epilogue::residual);  // (B, C)
    timer.lap(&ForwardProfile::mlp_ms);
  }
  layernorm_rows(ws.ln.data(), ws.x.data(), weights.ln_f_weight, weights.ln_f_bias, B, config);
  timer.lap(&ForwardProfile::layernorm_ms);
  k::linear_matrix(ws.logits.data(), ws.ln.data(), weights.head, nullptr, B, C, V);  // (B, V)
  timer.lap(&ForwardProfile::logits_ms);
  for (std::int64_t b = 0; b < B; ++b) {
    std::copy_n(ws.logits.data() + b * V, V, states[b]->logits.get());
    states[b]->length += 1;
  }
  timer.finish();
  for (ForwardProfile* p : profiles) {
    p->attention_ms += step.attention_ms;
    p->mlp_ms += step.mlp_ms;
    p->layernorm_ms += step.layernorm_ms;
    p->logits_ms += step.logits_ms;
    p->total_ms += step.total_ms;
  }
}

}  // namespace kael::model
