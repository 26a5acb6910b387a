// kael::nn::Module: the base of every layer and model, as torch.nn.Module. A module owns named
// parameters (tensors that require a gradient), buffers (tensors that do not) and child modules;
// their dotted names ("blocks.0.attn.qkv.weight") in registration order are what
// named_parameters(), state_dict() and load_state_dict() use.
//
// Registered tensors are handles (a copy shares the values and the gradient), so a layer keeps
// its own copy in a member (`weight = register_parameter("weight", ...)`) and the module's copy
// sees every update made through either.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kael/core/tensor.hpp"

namespace kael::nn {

// What save_safetensors takes (io::TensorMap): name -> tensor, in name order.
using StateDict = std::map<std::string, Tensor>;

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;  // a copy would share parameters but not registrations
  Module& operator=(const Module&) = delete;

  // The single-input forward of layers such as Linear, which Sequential chains; a module
  // without one throws ValueError naming it.
  virtual Tensor forward(const Tensor& input);
  Tensor operator()(const Tensor& input) { return forward(input); }

  // Parameters of this module and its descendants, depth first in registration order; a tensor
  // registered under two names (tied weights) comes once, under the first.
  std::vector<NamedTensor> named_parameters() const;
  std::vector<Tensor> parameters() const;
  std::vector<NamedTensor> named_buffers() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }

  // Parameters and buffers by dotted name (buffers registered as not persistent are left out).
  StateDict state_dict() const;
  // Checks every parameter and persistent buffer first (a missing name is Error "state dict is
  // missing parameter NAME", a shape mismatch ValueError), then copies all of them under
  // NoGradGuard, so a failed load leaves the module unchanged. Entries the module does not
  // have are ignored; dtypes convert to the parameter's.
  void load_state_dict(const StateDict& state);

  // Training mode (dropout active) for this module and its descendants; eval() is train(false).
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Moves every parameter and buffer; this build has only the CPU (anything else is an Error).
  void to(Device device);
  void to(std::string_view device);
  // Drops the gradient of every parameter (torch's default set_to_none, after which grad() is
  // undefined), or with set_to_none false fills the ones that exist with zeros in place.
  void zero_grad(bool set_to_none = true);

  // The name of the module's class for messages ("Linear"); set by each layer.
  virtual std::string name() const { return "Module"; }

 protected:
  // Registers `value` as a parameter (it then requires a gradient) and returns it.
  Tensor register_parameter(std::string name, Tensor value);
  // Registers a tensor that is state but not a parameter (a mask, running statistics).
  Tensor register_buffer(std::string name, Tensor value, bool persistent = true);
  template <class M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
    add_child(std::move(name), module);
    return module;
  }

 private:
  struct Buffer {
    std::string name;
    Tensor tensor;
    bool persistent;
  };
  void add_child(std::string name, std::shared_ptr<Module> module);
  void check_name(const std::string& name) const;
  void collect_parameters(const std::string& prefix, std::vector<NamedTensor>& out) const;
  void collect_buffers(const std::string& prefix, bool persistent_only, std::vector<NamedTensor>& out) const;

  std::vector<NamedTensor> parameters_;
  std::vector<Buffer> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// Module::load_state_dict's rule for any list of named tensors (the Python Module uses it too):
// every name present with the same shape, or nothing is copied.
void load_named_tensors(const std::vector<NamedTensor>& targets, const StateDict& state);

}  // namespace kael::nn
