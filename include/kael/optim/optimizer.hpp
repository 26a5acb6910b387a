// The base of kael's optimizers (torch.optim's semantics, one parameter group): it holds the
// parameters (handles: they share storage and gradient with the model's tensors), the learning
// rate and each parameter's state, and saves and restores that state as a flat map of tensors
// that kael::io::save_safetensors can write (docs/optim.md):
//   "param_groups.0.lr", "param_groups.0.<hyperparameter>"   F64 scalars (betas: F64 [2],
//                                                            nesterov: BOOL scalar)
//   "param_groups.0.params"                                  I64 [n]: 0 .. n-1
//   "state.<i>.<buffer>"                                     parameter i's buffers (exp_avg, ...)
//   "state.<i>.step"                                         I64 scalar, for optimizers that count
// A parameter has state entries only once a step has updated it, as in torch.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kael/core/tensor.hpp"

namespace kael::optim {

using StateDict = std::map<std::string, Tensor>;

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;  // copies would share the moment buffers
  Optimizer& operator=(const Optimizer&) = delete;
  Optimizer(Optimizer&&) = default;
  Optimizer& operator=(Optimizer&&) = default;

  // One update of every parameter that has a gradient (the others are skipped, their state
  // untouched), in place and without recording history.
  virtual void step() = 0;
  // Drops every parameter's gradient (torch's set_to_none), or zeroes it in place.
  void zero_grad(bool set_to_none = true);

  double lr() const { return lr_; }
  void set_lr(double lr);  // for schedules; ValueError when negative
  const std::vector<Tensor>& params() const { return params_; }
  const std::string& name() const { return name_; }  // "SGD", "Adam", "AdamW"

  // The state in the format above. The buffers are the optimizer's own tensors, not copies.
  StateDict state_dict() const;
  // Replaces the hyperparameters (lr included) and every parameter's state by copies of those
  // in `state`. ValueError, changing nothing, when a key is unknown or missing, the parameter
  // count differs, or a buffer's shape is not its parameter's.
  void load_state_dict(const StateDict& state);

 protected:
  // What a parameter's state holds: its buffers (in buffer_names() order; empty until the
  // first step that updates it) and, for optimizers that count, its steps.
  struct ParamState {
    std::int64_t step = 0;
    std::vector<Tensor> buffers;
  };
  using Hyperparameters = std::vector<std::pair<std::string, Tensor>>;

  // ValueError naming `name` for no parameters, an undefined one, a non-leaf or a dtype other
  // than F32 and F64, or a negative lr.
  Optimizer(std::string name, std::vector<Tensor> params, double lr);

  // The hyperparameters other than lr and params, as saved.
  virtual Hyperparameters hyperparameters() const = 0;
  // Validates all of `values` (the keys of hyperparameters(), without the prefix) before
  // taking any, as the constructor does; ValueError naming the bad one.
  virtual void set_hyperparameters(const std::map<std::string, Tensor>& values) = 0;
  // The names of a parameter's buffers, and whether it has a step count.
  virtual std::vector<std::string> buffer_names() const = 0;
  virtual bool counts_steps() const = 0;

  // The gradient of parameter i, contiguous and of its dtype; undefined when it has none.
  // ValueError when the gradient's shape is not the parameter's.
  Tensor gradient(std::size_t i) const;
  // Calls update(data) with the parameter's elements contiguous, writing them back to a
  // strided parameter after, and marks the parameter as changed in place.
  template <class F>
  void update_in_place(std::size_t i, F&& update);

  std::string name_;
  std::vector<Tensor> params_;
  std::vector<ParamState> state_;
  double lr_;
};

template <class F>
void Optimizer::update_in_place(std::size_t i, F&& update) {
  Tensor& p = params_[i];
  Tensor work = p.is_contiguous() ? p : p.clone();
  update(work);
  if (work.raw_data() != p.raw_data()) p.copy_(work);
  else p.bump_version();  // as any in-place write: autograd's saved copies of p are stale now
}

}  // namespace kael::optim
