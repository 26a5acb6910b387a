// Stochastic gradient descent as torch.optim.SGD, for each parameter p with gradient g:
//   g = g + weight_decay * p
//   buf = g on the first step, else momentum * buf + (1 - dampening) * g   (momentum != 0)
//   g = nesterov ? g + momentum * buf : buf                               (momentum != 0)
//   p = p - lr * g
#pragma once

#include <vector>

#include "kael/optim/optimizer.hpp"

namespace kael::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;  // needs momentum > 0 and dampening 0
};

class SGD : public OptimizerOf<SGDOptions> {
 public:
  // ValueError for a negative option or nesterov without momentum or with dampening.
  SGD(std::vector<Tensor> params, const SGDOptions& options);
  // Several parameter groups, each with its own options.
  explicit SGD(std::vector<ParamGroup<SGDOptions>> groups);
  void step() override;

 protected:
  Hyperparameters hyperparameters(std::size_t group) const override;
  void set_hyperparameters(const std::vector<std::map<std::string, Tensor>>& groups) override;
  // momentum_buffer (made on the first step with momentum != 0)
  std::vector<std::string> buffer_names() const override { return {"momentum_buffer"}; }
  bool counts_steps() const override { return false; }

 private:
  static void check(const SGDOptions& options);
};

}  // namespace kael::optim
