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

const std::string kGroup = "param_groups.0.";
const std::string kState = "state.";

// "state.<i>.<name>" split into i and name; false for anything else.
bool parse_state_key(const std::string& key, std::size_t& index, std::string& name) {
  if (key.compare(0, kState.size(), kState) != 0) return false;
  const char* begin = key.data() + kState.size();
  const char* end = key.data() + key.size();
  const auto [dot, error] = std::from_chars(begin, end, index);
  if (error != std::errc() || dot == begin || dot == end || *dot != '.') return false;
  if (*begin == '0' && dot - begin > 1) return false;  // one spelling per index
  name.assign(dot + 1, end);
  return true;
}

}  // namespace

Optimizer::Optimizer(std::string name, std::vector<Tensor> params, double lr)
    : name_(std::move(name)), params_(std::move(params)), lr_(lr) {
  if (params_.empty()) throw ValueError(name_ + ": optimizer got an empty parameter list");
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    const std::string which = name_ + ": parameter " + std::to_string(i);
    if (!p.defined()) throw ValueError(which + " is an undefined tensor");
    if (!p.is_leaf()) throw ValueError(which + ": can't optimize a non-leaf Tensor");
    if (p.dtype() != DType::F32 && p.dtype() != DType::F64)
      throw TypeError(which + " is " + std::string(dtype_name(p.dtype())) + "; the optimizers update F32 and F64");
  }
  detail::check_non_negative(name_, "learning rate", lr);
  state_.resize(params_.size());
}

void Optimizer::set_lr(double lr) {
  detail::check_non_negative(name_, "learning rate", lr);
  lr_ = lr;
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
  out[kGroup + "lr"] = detail::scalar_tensor(lr_);
  for (auto& [key, value] : hyperparameters()) out[kGroup + key] = value;
  out[kGroup + "params"] = arange(static_cast<double>(params_.size()), DType::I64);
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
  for (const auto& [key, value] : hyperparameters()) known.insert(key);

  std::map<std::string, Tensor> group;  // without the prefix
  std::vector<std::map<std::string, Tensor>> entries(params_.size());
  for (const auto& [key, value] : state) {
    std::size_t index = 0;
    std::string name;
    if (key.compare(0, kGroup.size(), kGroup) == 0) {
      name = key.substr(kGroup.size());
      if (name != "lr" && name != "params" && !known.contains(name))
        throw ValueError(op + ": unknown key " + key + " (not a hyperparameter of " + name_ + ")");
      group[name] = value;
    } else if (parse_state_key(key, index, name)) {
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

  const auto params_it = group.find("params");
  if (params_it == group.end()) throw ValueError(op + ": the state has no " + kGroup + "params");
  if (params_it->second.dim() != 1 || params_it->second.numel() != static_cast<std::int64_t>(params_.size()))
    throw ValueError(op + ": the state is for " + std::to_string(params_it->second.numel()) +
                     " parameters but the optimizer has " + std::to_string(params_.size()));
  const double lr = detail::scalar_value(name_, group, "lr");
  detail::check_non_negative(name_, "learning rate", lr);

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
  set_hyperparameters(group);  // validates every value before taking any; the last check that can throw
  lr_ = lr;
  state_ = std::move(loaded);
}

}  // namespace kael::optim
