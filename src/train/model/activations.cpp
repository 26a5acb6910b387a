#include "train/model/activations.hpp"

#include <algorithm>

#include "kernels/cross_entropy.hpp"

namespace kael::train {

std::int64_t plan_activations(Activations& a, const model::Config& config, std::int64_t B, std::int64_t T,
                              float* base) {
  const std::int64_t M = B * T, C = config.n_embd, H = config.mlp_dim(), NH = config.n_head;
  const std::int64_t V = config.vocab_size, wide = std::max(3 * C, H);
  std::int64_t used = 0;
  // Each buffer starts on a 64-byte boundary (16 floats) for the vector kernels.
  const auto take = [&](std::int64_t n) {
    float* p = base ? base + used : nullptr;
    used += (n + 15) / 16 * 16;
    return p;
  };
  a.layers.assign(static_cast<std::size_t>(config.n_layer), {});
  for (LayerActivations& l : a.layers) {
    l.ln_1 = take(M * C);
    l.ln_1_mean = take(M);
    l.ln_1_rstd = take(M);
    l.qkv = take(M * 3 * C);
    l.probs = take(B * NH * T * T);
    l.attn = take(M * C);
    l.mid = take(M * C);
    l.ln_2 = take(M * C);
    l.ln_2_mean = take(M);
    l.ln_2_rstd = take(M);
    l.fc = take(M * H);
    l.gelu = take(M * H);
  }
  a.residual.assign(static_cast<std::size_t>(config.n_layer) + 1, nullptr);
  for (float*& r : a.residual) r = take(M * C);
  a.ln_f = take(M * C);
  a.ln_f_mean = take(M);
  a.ln_f_rstd = take(M);
  a.losses = take(M);
  a.branch = take(M * C);
  a.d_residual = take(M * C);
  a.d_branch = take(M * C);
  a.d_small = take(M * C);
  a.d_wide = take(M * wide);
  // The head and the matrix products (a packed weight) never run at once: they share the scratch.
  a.scratch_floats = std::max(kernels::head_scratch_floats(M, C, V), C * wide);
  a.scratch = take(a.scratch_floats);
  return used;
}

}  // namespace kael::train
