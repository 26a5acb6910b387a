// Adam and AdamW as torch.optim's (amsgrad and maximize off), for each parameter p with
// gradient g, t counting its steps:
//   t += 1
//   Adam:  g = g + weight_decay * p            AdamW:  p = p * (1 - lr * weight_decay)
//   m = m + (1 - beta1) * (g - m)             (torch's lerp)
//   v = beta2 * v + (1 - beta2) * g * g
//   p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// The bias corrections are computed in double, as Python floats; the elementwise math is in the
// parameter's dtype.
#pragma once

#include <utility>
#include <vector>

#include "kael/optim/optimizer.hpp"

namespace kael::optim {

struct AdamOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0;  // L2: added to the gradient
};

struct AdamWOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;  // decoupled: p *= 1 - lr * weight_decay
};

class Adam : public OptimizerOf<AdamOptions> {
 public:
  // ValueError for a negative lr, eps or weight_decay, or a beta outside [0, 1).
  Adam(std::vector<Tensor> params, const AdamOptions& options);
  // Several parameter groups, each with its own options.
  explicit Adam(std::vector<ParamGroup<AdamOptions>> groups);
  void step() override;
  bool decoupled_weight_decay() const { return decoupled_; }

 protected:
  Adam(std::string name, std::vector<ParamGroup<AdamOptions>> groups, bool decoupled);
  Hyperparameters hyperparameters(std::size_t group) const override;
  void set_hyperparameters(const std::vector<std::map<std::string, Tensor>>& groups) override;
  std::vector<std::string> buffer_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  bool counts_steps() const override { return true; }

 private:
  void check(const AdamOptions& options) const;
  bool decoupled_;
};

// torch.optim.AdamW: Adam with the weight decay decoupled from the gradient.
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, const AdamWOptions& options);
  explicit AdamW(std::vector<ParamGroup<AdamWOptions>> groups);
  AdamWOptions options(std::size_t group = 0) const;
};

}  // namespace kael::optim
