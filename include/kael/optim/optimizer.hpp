// The base of kael's optimizers (torch.optim's semantics): it holds the parameters (handles:
// they share storage and gradient with the model's tensors) in parameter groups, each with its
// own options (torch's param_groups: weight decay on some parameters only, a learning rate per
// group), and each parameter's state, and saves and restores that state as a flat map of
// tensors that kael::io::save_safetensors can write (docs/optim.md), with g the group and i a
// parameter's index counted over all the groups in order:
//   "param_groups.<g>.lr", "param_groups.<g>.<hyperparameter>"   F64 scalars (betas: F64 [2],
//                                                                nesterov: BOOL scalar)
//   "param_groups.<g>.params"                                    I64: the group's indices i
//   "state.<i>.<buffer>"                                         parameter i's buffers (exp_avg, ...)
//   "state.<i>.step"                                             I64 scalar, for optimizers that count
// A parameter has state entries only once a step has updated it, as in torch.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kael/core/error.hpp"
#include "kael/core/tensor.hpp"

namespace kael::optim {

using StateDict = std::map<std::string, Tensor>;

// One parameter group: its parameters and the options they are updated with (SGDOptions,
// AdamOptions, AdamWOptions), as an entry of torch's param_groups.
template <class Options>
struct ParamGroup {
  std::vector<Tensor> params;
  Options options;
};

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

  // The first group's learning rate; set_lr sets every group's (ValueError when negative).
  double lr() const { return group_lr(0); }
  void set_lr(double lr);
  std::size_t num_groups() const { return group_begin_.size() - 1; }
  // Group g's parameters, its learning rate (for schedules) and its other options by name.
  std::vector<Tensor> group_params(std::size_t group) const;
  virtual double group_lr(std::size_t group) const = 0;
  void set_group_lr(std::size_t group, double lr);
  // Every parameter, group after group (the order of the state's indices).
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

  // ValueError naming `name` for no parameters, an empty group, an undefined parameter, a
  // non-leaf, a dtype other than F32 and F64, or a parameter in two groups.
  Optimizer(std::string name, std::vector<std::vector<Tensor>> groups);

  // Group g's hyperparameters other than lr and params, as saved.
  virtual Hyperparameters hyperparameters(std::size_t group) const = 0;
  // Validates all of `groups` (each the keys of hyperparameters() and "lr", without the prefix)
  // before taking any, as the constructor does; ValueError naming the bad one.
  virtual void set_hyperparameters(const std::vector<std::map<std::string, Tensor>>& groups) = 0;
  // Stores a checked learning rate for group g.
  virtual void store_lr(std::size_t group, double lr) = 0;
  // The group that parameter i belongs to.
  std::size_t group_of(std::size_t i) const;
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
  std::vector<std::size_t> group_begin_;  // group g's parameters are [begin[g], begin[g + 1])
};

// An optimizer whose groups each hold an `Options` (with its `lr`): the options per group,
// read by options(g) and the schedules' learning rate, kept in one place for every optimizer.
template <class Options>
class OptimizerOf : public Optimizer {
 public:
  Options options(std::size_t group = 0) const {  // lr as it is now
    if (group >= options_.size()) throw IndexError(name_ + ": no parameter group " + std::to_string(group));
    return options_[group];
  }
  double group_lr(std::size_t group) const override { return options(group).lr; }

 protected:
  OptimizerOf(std::string name, std::vector<ParamGroup<Options>> groups)
      : Optimizer(std::move(name), take_params(groups)), options_(group_options(groups)) {}
  void store_lr(std::size_t group, double lr) override { options_[group].lr = lr; }

  std::vector<Options> options_;  // one per group

 private:
  static std::vector<std::vector<Tensor>> take_params(std::vector<ParamGroup<Options>>& groups) {
    std::vector<std::vector<Tensor>> out;
    for (auto& g : groups) out.push_back(std::move(g.params));
    return out;
  }
  static std::vector<Options> group_options(const std::vector<ParamGroup<Options>>& groups) {
    std::vector<Options> out;
    for (const auto& g : groups) out.push_back(g.options);
    return out;
  }
};

template <class F>
void Optimizer::update_in_place(std::size_t i, F&& update) {
  Tensor& p = params_[i];
  Tensor work = p.is_contiguous() ? p : p.clone();
  update(work);
  if (work.device_raw_data() != p.device_raw_data()) p.copy_(work);
  else p.bump_version();  // as any in-place write: autograd's saved copies of p are stale now
}

}  // namespace kael::optim
