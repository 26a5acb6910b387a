#include "kael/nn/module.hpp"

#include <set>

#include "kael/core/error.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"

namespace kael::nn {

Tensor Module::forward(const Tensor&) {
  throw ValueError(str(name(), " has no single-input forward"));
}

void Module::check_name(const std::string& name) const {
  if (name.empty() || name.find('.') != std::string::npos)
    throw ValueError(str(this->name(), ": '", name, "' is not a valid name (non-empty, no '.')"));
  const auto taken = [&](const auto& list) {
    for (const auto& entry : list)
      if (entry.name == name) return true;
    return false;
  };
  bool child = false;
  for (const auto& [child_name, module] : children_) child = child || child_name == name;
  if (taken(parameters_) || taken(buffers_) || child)
    throw ValueError(str(this->name(), ": the name '", name, "' is registered already"));
}

Tensor Module::register_parameter(std::string name, Tensor value) {
  check_name(name);
  if (!is_floating(value.dtype()))
    throw TypeError(str(this->name(), ": parameter '", name, "' must be floating, not ", dtype_name(value.dtype())));
  value.requires_grad_(true);
  parameters_.push_back({std::move(name), value});
  return value;
}

Tensor Module::register_buffer(std::string name, Tensor value, bool persistent) {
  check_name(name);
  buffers_.push_back({std::move(name), value, persistent});
  return value;
}

void Module::add_child(std::string name, std::shared_ptr<Module> module) {
  if (!module) throw ValueError(str(this->name(), ": module '", name, "' is null"));
  check_name(name);
  children_.emplace_back(std::move(name), std::move(module));
}

void Module::collect_parameters(const std::string& prefix, std::vector<NamedTensor>& out) const {
  for (const auto& [name, tensor] : parameters_) out.push_back({prefix + name, tensor});
  for (const auto& [name, child] : children_) child->collect_parameters(prefix + name + ".", out);
}

void Module::collect_buffers(const std::string& prefix, bool persistent_only, std::vector<NamedTensor>& out) const {
  for (const auto& buffer : buffers_)
    if (buffer.persistent || !persistent_only) out.push_back({prefix + buffer.name, buffer.tensor});
  for (const auto& [name, child] : children_) child->collect_buffers(prefix + name + ".", persistent_only, out);
}

std::vector<NamedTensor> Module::named_parameters() const {
  std::vector<NamedTensor> all;
  collect_parameters("", all);
  // A tensor registered in two places (tied weights) is one parameter: its first name only,
  // so that an optimizer updates it once. Copies of a tensor share its autograd state.
  std::vector<NamedTensor> out;
  std::set<const void*> seen;
  for (auto& entry : all)
    if (seen.insert(entry.tensor.autograd_meta().get()).second) out.push_back(std::move(entry));
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, tensor] : named_parameters()) out.push_back(tensor);
  return out;
}

std::vector<NamedTensor> Module::named_buffers() const {
  std::vector<NamedTensor> out;
  collect_buffers("", false, out);
  return out;
}

StateDict Module::state_dict() const {
  StateDict out;
  std::vector<NamedTensor> params;
  collect_parameters("", params);  // every name of a tied tensor, as torch's state_dict
  for (auto& [name, tensor] : params) out.emplace(name, tensor.detach());
  std::vector<NamedTensor> buffers;
  collect_buffers("", true, buffers);
  for (auto& [name, tensor] : buffers) out.emplace(name, tensor);
  return out;
}

void Module::load_state_dict(const StateDict& state) {
  std::vector<NamedTensor> all = named_parameters();
  collect_buffers("", true, all);
  load_named_tensors(all, state);
}

void load_named_tensors(const std::vector<NamedTensor>& targets, const StateDict& state) {
  for (const auto& [name, tensor] : targets) {
    const auto found = state.find(name);
    if (found == state.end()) throw Error(str("state dict is missing parameter ", name));
    if (found->second.shape() != tensor.shape())
      throw ValueError(str("parameter ", name, " has shape ", shape_to_string(tensor.shape()), " but the state dict has ",
                           shape_to_string(found->second.shape())));
  }
  const autograd::NoGradGuard guard;
  for (auto [name, tensor] : targets) tensor.copy_(state.at(name));
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::to(Device device) {
  check_device_available(device);
  // Tensors can live on a CUDA device, the layers' operations cannot yet: refused rather than
  // leaving the parameters on the CPU behind the caller's back.
  if (device.type != Device::Type::cpu)
    throw Error(str("Module.to(", device.str(), "): kael's models run on the CPU only so far"));
}

void Module::to(std::string_view device) { to(parse_device(device)); }

void Module::zero_grad(bool set_to_none) {
  autograd::NoGradGuard no_grad;
  for (auto& [name, tensor] : named_parameters()) {
    if (set_to_none) tensor.zero_grad();
    else if (Tensor g = tensor.grad(); g.defined()) g.zero_();
  }
}

}  // namespace kael::nn
