// Adadelta as torch.optim.Adadelta (maximize off), for each parameter p with gradient g:
//   g = g + weight_decay * p
//   square_avg = rho * square_avg + (1 - rho) * g * g
//   delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g
//   acc_delta = rho * acc_delta + (1 - rho) * delta * delta
//   p = p - lr * delta
// in the parameter's dtype, the scalars rounded to it as torch's kernels round them.
#pragma once

#include <vector>

#include "kael/optim/optimizer.hpp"

namespace kael::optim {

struct AdadeltaOptions {
  double lr = 1.0;
  double rho = 0.9;
  double eps = 1e-6;
  double weight_decay = 0;
};

class Adadelta : public OptimizerOf<AdadeltaOptions> {
 public:
  // ValueError for a negative lr, eps or weight_decay, or rho outside [0, 1].
  Adadelta(std::vector<Tensor> params, const AdadeltaOptions& options);
  explicit Adadelta(std::vector<ParamGroup<AdadeltaOptions>> groups);
  void step() override;

 protected:
  Hyperparameters hyperparameters(std::size_t group) const override;
  void set_hyperparameters(const std::vector<std::map<std::string, Tensor>>& groups) override;
  std::vector<std::string> buffer_names() const override { return {"square_avg", "acc_delta"}; }
  bool counts_steps() const override { return true; }

 private:
  static void check(const AdadeltaOptions& options);
};

}  // namespace kael::optim
