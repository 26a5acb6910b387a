#include "model/layers.hpp"

#include "kernels/linear.hpp"
#include "kernels/norm.hpp"

namespace kael::model {
namespace {

namespace k = kael::kernels;
using k::Epilogue;

// x += attn(ln(x)); ln holds ln_1(x).
void attention_block(const Config& config, const LayerWeights& w, const LayerBuffers& b, CacheAttention& cache,
                     int layer) {
  const std::int64_t C = config.n_embd;
  k::linear_matrix(b.qkv, b.ln, w.qkv, w.qkv_bias, b.rows, C, 3 * C);  // (rows, 3C)
  cache.attend(b.att, b.qkv, layer);                                     // (rows, C)
  // The projection adds itself to the residual stream: no separate pass over x.
  k::linear_matrix(b.x, b.att, w.attn_proj, w.attn_proj_bias, b.rows, C, C, Epilogue::residual);
}

// x += mlp(ln(x)): C -> H with GELU (fused into the first product) -> C, added to x.
void mlp_block(const Config& config, const LayerWeights& w, const LayerBuffers& b) {
  const std::int64_t C = config.n_embd, H = config.mlp_dim();
  k::linear_matrix(b.fc, b.ln, w.fc, w.fc_bias, b.rows, C, H, Epilogue::gelu);                 // (rows, H)
  k::linear_matrix(b.x, b.fc, w.mlp_proj, w.mlp_proj_bias, b.rows, H, C, Epilogue::residual);  // (rows, C)
}

}  // namespace

void run_layers(const Config& config, const Weights& weights, const LayerBuffers& buffers, CacheAttention& cache,
                PartTimer& timer) {
  const std::int64_t C = config.n_embd;
  const float eps = config.layer_norm_epsilon;
  for (int layer = 0; layer < config.n_layer; ++layer) {
    const LayerWeights& w = weights.layers[static_cast<std::size_t>(layer)];
    k::layer_norm(buffers.ln, buffers.x, w.ln_1_weight, w.ln_1_bias, buffers.rows, C, eps);  // (rows, C)
    timer.lap(&ForwardProfile::layer_norm_ms);
    attention_block(config, w, buffers, cache, layer);
    timer.lap(&ForwardProfile::attention_ms);
    k::layer_norm(buffers.ln, buffers.x, w.ln_2_weight, w.ln_2_bias, buffers.rows, C, eps);  // (rows, C)
    timer.lap(&ForwardProfile::layer_norm_ms);
    mlp_block(config, w, buffers);
    timer.lap(&ForwardProfile::mlp_ms);
  }
}

void final_logits(const Config& config, const Weights& weights, float* logits, float* ln, const float* x,
                  std::int64_t rows, PartTimer& timer) {
  const std::int64_t C = config.n_embd;
  k::layer_norm(ln, x, weights.ln_f_weight, weights.ln_f_bias, rows, C, config.layer_norm_epsilon);  // (rows, C)
  timer.lap(&ForwardProfile::layer_norm_ms);
  k::linear_matrix(logits, ln, weights.head, nullptr, rows, C, config.vocab_size);  // (rows, V)
  timer.lap(&ForwardProfile::logits_ms);
}

}  // namespace kael::model
