// Where a training step's time goes: the parts of TrainProfile (forward and backward matrix
// products, attention, the fused head, the rest) plus zero_grad, the gradient norm and AdamW (the clipping folded in, as kael finetune does), in CPU seconds per
// optimizer step (all threads), so the figures hold on a machine shared with other work. The
// matrix products are also given in GFLOP per CPU second. Random token ids, dropout 0.
// Usage: train_profile MODEL_DIR [B=4] [T=64] [steps=3] [threads=2] [precision=f32|bf16]
// (the first step is a warm-up and is not counted).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <vector>

#include "kael/core/cpu_clock.hpp"
#include "kael/model/gpt2.hpp"
#include "kael/train/adamw.hpp"
#include "kael/train/gpt2_train.hpp"

namespace {

double cpu_ms() { return 1e3 * kael::process_cpu_seconds(); }

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 2) {
    std::fprintf(stderr, "usage: train_profile MODEL_DIR [B=4] [T=64] [steps=3] [threads=2] [precision=f32|bf16]\n");
    return 2;
  }
  const int B = argc > 2 ? std::atoi(argv[2]) : 4, T = argc > 3 ? std::atoi(argv[3]) : 64;
  const int steps = argc > 4 ? std::atoi(argv[4]) : 3, threads = argc > 5 ? std::atoi(argv[5]) : 2;
  kael::model::set_num_threads(threads);
  kael::train::TrainableGPT2 model = kael::train::TrainableGPT2::load(argv[1]);
  const kael::model::Config& config = model.config();
  if (argc > 6) model.set_precision(kael::train::parse_precision(argv[6]));
  model.reserve(B, T);
  kael::train::AdamW adamw(model.parameters(), {});
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> token(0, static_cast<int>(config.vocab_size) - 1);
  std::vector<std::int32_t> inputs(static_cast<std::size_t>(B) * T), targets(inputs.size());

  kael::train::TrainProfile profile;
  double zero_ms = 0, norm_ms = 0, adamw_ms = 0, step_ms = 0;
  for (int s = 0; s <= steps; ++s) {
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      inputs[i] = token(rng);
      targets[i] = token(rng);
    }
    const bool counted = s > 0;
    if (counted) model.set_profile(&profile);
    const double t0 = cpu_ms();
    model.zero_grad();
    const double t1 = cpu_ms();
    model.forward_backward(inputs.data(), targets.data(), B, T, 1.0f);
    const double t2 = cpu_ms();
    // As kael finetune steps: the clipping (max norm 1) folded into the update.
    const double norm = model.grad_norm();
    const double t3 = cpu_ms();
    adamw.step(model.parameters(), 1e-4, kael::train::TrainableGPT2::clip_coefficient(norm, 1.0));
    const double t4 = cpu_ms();
    model.set_profile(nullptr);
    if (counted) {
      zero_ms += t1 - t0;
      norm_ms += t3 - t2;
      adamw_ms += t4 - t3;
      step_ms += t4 - t0;
    }
  }

  // Multiply-adds of the block products (x2 for FLOP): forward, and each of dX and dW.
  const double M = static_cast<double>(B) * T, C = static_cast<double>(config.n_embd);
  const double H = static_cast<double>(config.mlp_dim()), V = static_cast<double>(config.vocab_size);
  const double block_flop = 2 * M * config.n_layer * (C * 3 * C + C * C + 2 * C * H);
  const double head_flop = 3 * 2 * M * C * V;
  const auto per_step = [&](double ms) { return ms / 1e3 / steps; };
  const auto row = [&](const char* name, double ms, double flop) {
    std::printf("  %-22s %8.3f s %5.1f%%", name, per_step(ms), 100 * ms / step_ms);
    if (flop > 0) std::printf("  %6.1f GFLOP/CPU-s", flop / 1e9 / per_step(ms));
    std::printf("\n");
  };
  std::printf("train_profile: %d x %d tokens, %d threads, %d steps after a warm-up; CPU seconds per step (all threads)\n",
              B, T, threads, steps);
  row("forward matmul", profile.forward_matmul_ms, block_flop);
  row("forward attention", profile.forward_attention_ms, 0);
  row("forward other", profile.forward_other_ms, 0);
  row("head (fwd + bwd)", profile.head_ms, head_flop);
  row("backward matmul", profile.backward_matmul_ms, 2 * block_flop);
  row("backward attention", profile.backward_attention_ms, 0);
  row("backward other", profile.backward_other_ms, 0);
  row("grad norm", norm_ms, 0);
  row("zero_grad", zero_ms, 0);
  row("AdamW (+ clip)", adamw_ms, 0);
  row("step", step_ms, 3 * block_flop + head_flop);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "train_profile: %s\n", e.what());
  return 1;
}
