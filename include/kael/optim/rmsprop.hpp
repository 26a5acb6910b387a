// RMSprop as torch.optim.RMSprop (maximize off), for each parameter p with gradient g:
//   g = g + weight_decay * p
//   square_avg = alpha * square_avg + (1 - alpha) * g * g
//   centered:  grad_avg = grad_avg + (1 - alpha) * (g - grad_avg)   (torch's lerp)
//              avg = sqrt(square_avg - grad_avg * grad_avg) + eps
//   else       avg = sqrt(square_avg) + eps
//   momentum > 0:  buf = momentum * buf + g / avg;  p = p - lr * buf
//   else           p = p - lr * g / avg
// The state always holds square_avg, momentum_buffer and grad_avg (the last two stay zero
// when unused), so that a state dict has one layout whatever the options.
#pragma once

#include <vector>

#include "kael/optim/optimizer.hpp"

namespace kael::optim {

struct RMSpropOptions {
  double lr = 1e-2;
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0;
  double momentum = 0;
  bool centered = false;
};

class RMSprop : public OptimizerOf<RMSpropOptions> {
 public:
  // ValueError for a negative lr, eps, weight_decay, momentum or alpha.
  RMSprop(std::vector<Tensor> params, const RMSpropOptions& options);
  explicit RMSprop(std::vector<ParamGroup<RMSpropOptions>> groups);
  void step() override;

 protected:
  Hyperparameters hyperparameters(std::size_t group) const override;
  void set_hyperparameters(const std::vector<std::map<std::string, Tensor>>& groups) override;
  std::vector<std::string> buffer_names() const override { return {"square_avg", "momentum_buffer", "grad_avg"}; }
  bool counts_steps() const override { return true; }

 private:
  static void check(const RMSpropOptions& options);
};

}  // namespace kael::optim
