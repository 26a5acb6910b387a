// The base optimizer: parameters, lr, zero_grad and the state dict's format (optimizer.hpp).
#include "kael/optim/optimizer.hpp"

#include <charconv>
#include <set>

#include "kael/core/error.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "optim/checks.hpp"

namespace kael::optim {

namespace {

const std::string kGroups = "param_groups.";
const std::string kState = "state.";

std::string group_prefix(std::size_t g) { return kGroups + std::to_string(g) + "."; }

// "<prefix><n>.<name>" split into n and name; false for anything else.
bool parse_indexed_key(const std::string& key, const std::string& prefix, std::size_t& index, std::string& name) {
  if (key.compare(0, prefix.size(), prefix) != 0) return false;
  const char* begin = key.data() + prefix.size();
  const char* end = key.data() + key.size();
  const auto [dot, error] = std::from_chars(begin, end, index);
  if (error != std::errc() || dot == begin || dot == end || *dot != '.') return false;
  if (*begin == '0' && dot - begin > 1) return false;  // one spelling per index
  name.assign(dot + 1, end);
  return true;
}

}  // namespace

Optimizer::Optimizer(std::string name, std::vector<std::vector<Tensor>> groups) : name_(std::move(name)) {
  if (groups.empty()) throw ValueError(name_ + ": optimizer got an empty parameter list");
  group_begin_.push_back(0);
  std::set<const void*> seen;  // a parameter's autograd state: the same tensor, whatever the handle
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].empty()) throw ValueError(name_ + ": optimizer got an empty parameter list" +
                                            (groups.size() > 1 ? " in group " + std::to_string(g) : std::string()));
    for (Tensor& p : groups[g]) {
      const std::string which = name_ + ": parameter " + std::to_string(params_.size());
      if (!p.defined()) throw ValueError(which + " is an undefined tensor");
      if (!p.is_leaf()) throw ValueError(which + ": can't optimize a non-leaf Tensor");
      if (p.dtype() != DType::F32 && p.dtype() != DType::F64)
        throw TypeError(which + " is " + std::string(dtype_name(p.dtype())) + "; the optimizers update F32 and F64");
      const void* identity = p.autograd_meta() ? static_cast<const void*>(p.autograd_meta().get()) : nullptr;
      if (identity && !seen.insert(identity).second)
        throw ValueError(which + " appears more than once (some parameters appear in more than one parameter group, or "
                                 "twice in one)");
      params_.push_back(std::move(p));
    }
    group_begin_.push_back(params_.size());
  }
  state_.resize(params_.size());
}

std::vector<Tensor> Optimizer::group_params(std::size_t group) const {
  if (group >= num_groups()) throw IndexError(name_ + ": no parameter group " + std::to_string(group));
  return {params_.begin() + static_cast<std::ptrdiff_t>(group_begin_[group]),
          params_.begin() + static_cast<std::ptrdiff_t>(group_begin_[group + 1])};
}

std::size_t Optimizer::group_of(std::size_t i) const {
  std::size_t g = 0;
  while (i >= group_begin_[g + 1]) ++g;
  return g;
}

void Optimizer::set_lr(double lr) {
  detail::check_non_negative(name_, "learning rate", lr);
  for (std::size_t g = 0; g < num_groups(); ++g) store_lr(g, lr);
}

void Optimizer::set_group_lr(std::size_t group, double lr) {
  if (group >= num_groups()) throw IndexError(name_ + ": no parameter group " + std::to_string(group));
  detail::check_non_negative(name_, "learning rate", lr);
  store_lr(group, lr);
}

void Optimizer::zero_grad(bool set_to_none) {
  autograd::NoGradGuard no_grad;
  for (Tensor& p : params_) {
    if (set_to_none) {
      p.zero_grad();
    } else if (Tensor g = p.grad(); g.defined()) {
      g.zero_();
    }
  }
}

Tensor Optimizer::gradient(std::size_t i) const {
  const Tensor& p = params_[i];
  Tensor g = p.grad();
  if (!g.defined()) return g;
  if (g.shape() != p.shape())
    throw ValueError(name_ + ".step: parameter " + std::to_string(i) + " has shape " + shape_to_string(p.shape()) +
                     " but its gradient " + shape_to_string(g.shape()));
  return g.to(p.dtype()).contiguous();
}

StateDict Optimizer::state_dict() const {
  StateDict out;
  for (std::size_t g = 0; g < num_groups(); ++g) {
    const std::string prefix = group_prefix(g);
    out[prefix + "lr"] = detail::scalar_tensor(group_lr(g));
    for (auto& [key, value] : hyperparameters(g)) out[prefix + key] = value;
    out[prefix + "params"] = arange(static_cast<double>(group_begin_[g]), static_cast<double>(group_begin_[g + 1]), 1, DType::I64);
  }
  const std::vector<std::string> names = buffer_names();
  for (std::size_t i = 0; i < state_.size(); ++i) {
    const ParamState& s = state_[i];
    if (s.buffers.empty()) continue;  // not updated yet
    const std::string prefix = kState + std::to_string(i) + ".";
    for (std::size_t b = 0; b < names.size(); ++b) out[prefix + names[b]] = s.buffers[b];
    if (counts_steps()) out[prefix + "step"] = full({}, s.step, DType::I64);
  }
  return out;
}

void Optimizer::load_state_dict(const StateDict& state) {
  const std::string op = name_ + ".load_state_dict";
  const std::vector<std::string> names = buffer_names();
  const std::set<std::string> buffer_set(names.begin(), names.end());
  std::set<std::string> known;
  for (const auto& [key, value] : hyperparameters(0)) known.insert(key);

  std::vector<std::map<std::string, Tensor>> groups(num_groups());  // without the prefix
  std::vector<std::map<std::string, Tensor>> entries(params_.size());
  for (const auto& [key, value] : state) {
    std::size_t index = 0;
    std::string name;
    if (parse_indexed_key(key, kGroups, index, name)) {
      if (index >= num_groups())
        throw ValueError(op + ": " + key + " is for parameter group " + std::to_string(index) + " but the optimizer has " +
                         std::to_string(num_groups()));
      if (name != "lr" && name != "params" && !known.contains(name))
        throw ValueError(op + ": unknown key " + key + " (not a hyperparameter of " + name_ + ")");
      groups[index][name] = value;
    } else if (parse_indexed_key(key, kState, index, name)) {
      if (index >= params_.size())
        throw ValueError(op + ": " + key + " is for parameter " + std::to_string(index) + " but the optimizer has " +
                         std::to_string(params_.size()));
      if (!buffer_set.contains(name) && !(counts_steps() && name == "step"))
        throw ValueError(op + ": unknown key " + key + " (" + name_ + " keeps no " + name + ")");
      entries[index][name] = value;
    } else {
      throw ValueError(op + ": unknown key " + key);
    }
  }

  std::vector<double> lrs;
  for (std::size_t g = 0; g < num_groups(); ++g) {
    const std::string prefix = group_prefix(g);
    const auto params_it = groups[g].find("params");
    if (params_it == groups[g].end()) throw ValueError(op + ": the state has no " + prefix + "params");
    const std::int64_t expected = static_cast<std::int64_t>(group_begin_[g + 1] - group_begin_[g]);
    if (params_it->second.dim() != 1 || params_it->second.numel() != expected)
      throw ValueError(op + ": the state's group " + std::to_string(g) + " has " + std::to_string(params_it->second.numel()) +
                       " parameters but the optimizer's has " + std::to_string(expected));
    const double lr = detail::scalar_value(name_, groups[g], "lr", g);
    detail::check_non_negative(name_, "learning rate", lr);
    lrs.push_back(lr);
  }

  std::vector<ParamState> loaded(params_.size());
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (entries[i].empty()) continue;
    const std::string prefix = kState + std::to_string(i) + ".";
    ParamState& s = loaded[i];
    for (const std::string& name : names) {
      const auto it = entries[i].find(name);
      if (it == entries[i].end()) throw ValueError(op + ": the state has no " + prefix + name);
      const Tensor& buffer = it->second;
      if (!buffer.defined() || buffer.shape() != params_[i].shape())
        throw ValueError(op + ": " + prefix + name + " has shape " +
                         (buffer.defined() ? shape_to_string(buffer.shape()) : std::string("(undefined)")) +
                         " but parameter " + std::to_string(i) + " has " + shape_to_string(params_[i].shape()));
      Tensor copy = buffer.to(params_[i].dtype()).contiguous();
      s.buffers.push_back(copy.raw_data() == buffer.raw_data() ? copy.clone() : copy);  // never share the caller's
    }
    if (counts_steps()) {
      const auto it = entries[i].find("step");
      if (it == entries[i].end()) throw ValueError(op + ": the state has no " + prefix + "step");
      if (!it->second.defined() || it->second.numel() != 1) throw ValueError(op + ": " + prefix + "step must hold one number");
      const double step = it->second.value_as_double(0);
      if (!(step >= 0) || step != static_cast<double>(static_cast<std::int64_t>(step)))
        throw ValueError(op + ": " + prefix + "step must be a count, not " + std::to_string(step));
      s.step = static_cast<std::int64_t>(step);
    }
  }
  set_hyperparameters(groups);  // validates every value before taking any; the last check that can throw
  for (std::size_t g = 0; g < num_groups(); ++g) store_lr(g, lrs[g]);
  state_ = std::move(loaded);
}

}  // namespace kael::optim
