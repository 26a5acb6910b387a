// AdamW with torch.optim.AdamW's semantics (amsgrad off, maximize off), step by step:
//   t += 1
//   p  *= 1 - lr * weight_decay                      (only for parameters with weight_decay)
//   m   = m + (1 - beta1) * (g - m)                  (torch's lerp)
//   v   = beta2 * v + (1 - beta2) * g * g
//   p  -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// The hyperparameters and bias corrections are doubles, as Python's floats are, and each is
// rounded to float where torch's CPU kernels round it; the per-element math is in float. m and v live here, one pair per parameter, in the
// parameter's layout; with step_count() they are the whole optimizer state, and setting them
// back (moments(), set_step_count()) resumes bit for bit.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kael/train/gpt2_train.hpp"

namespace kael::train {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;  // applied to parameters whose weight_decay flag is set
};

// One parameter's moments: m (first) and v (second), numel floats each.
struct Moments {
  std::span<float> m;
  std::span<float> v;
};

class AdamW {
 public:
  // Moments zeroed for `parameters` (their count and sizes are fixed from here on).
  AdamW(std::span<const Parameter> parameters, const AdamWOptions& options);

  // One update of every parameter from its grad times grad_scale (the gradient clipping's
  // factor, TrainableGPT2::clip_coefficient: the same float product clip_grad_norm stores), at
  // learning rate lr. ValueError when `parameters` does not have the count and sizes given at
  // construction. Threaded.
  void step(std::span<Parameter> parameters, double lr, float grad_scale = 1.0f);

  const AdamWOptions& options() const { return options_; }
  std::int64_t step_count() const { return step_; }
  void set_step_count(std::int64_t step) { step_ = step; }
  // The moments of parameter i, in the order given at construction; writable, for restoring.
  Moments moments(std::size_t i);
  std::size_t size() const { return m_.size(); }

 private:
  AdamWOptions options_;
  std::int64_t step_ = 0;
  std::vector<std::vector<float>> m_, v_;
};

}  // namespace kael::train
