// Reverse-mode automatic differentiation, as PyTorch's autograd: every differentiable op run on
// tensors that require a gradient records a Node holding what its backward needs; backward()
// walks the nodes from the output in reverse topological order and accumulates the gradients
// of the leaves. Saved tensors remember their version: writing one in place before the
// backward that needs it is an error naming the op, never a silent wrong gradient.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kael/core/tensor.hpp"

namespace kael::autograd {

struct Node;

// A gradient hook (Tensor.register_hook): called with the gradient of its tensor; a defined
// result replaces that gradient, an undefined one leaves it.
using Hook = std::function<Tensor(const Tensor&)>;

// The autograd state of one tensor (shared by its copies).
struct Meta {
  bool requires_grad = false;
  Tensor grad;                     // leaves: the accumulated gradient; non-leaves: set by retain_grad
  std::shared_ptr<Node> grad_fn;   // non-leaves: the op that produced the tensor
  std::vector<Hook> hooks;         // leaves' hooks (a non-leaf's live on its grad_fn)
};

// A value an op saved for its backward, with the version it had then.
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& tensor) : tensor_(tensor.detach()), version_(tensor.version()) {}
  // The saved value; ValueError naming `op` if it was modified in place since it was saved.
  const Tensor& get(const std::string& op) const;

 private:
  Tensor tensor_;
  std::uint64_t version_ = 0;
};

// One recorded op: its inputs' autograd state and a function from the gradient of its output
// to the gradients of its inputs (an undefined Tensor where an input needs none).
struct Node {
  std::string name;  // the op, for error messages ("mul", "matmul", ...)
  std::vector<std::shared_ptr<Meta>> inputs;  // null for inputs that need no gradient
  std::function<std::vector<Tensor>(const Tensor& grad_output)> backward;
  bool released = false;  // the saved values are gone (backward ran without retain_graph)
  bool view = false;      // the output shares its input's bytes (view, select, slice, ...)
  std::vector<Hook> pre_hooks;  // run on the gradient of the output before `backward`
  std::weak_ptr<Meta> retained;  // retain_grad: the output that keeps its gradient (after the hooks)
};

// Whether ops record history on this thread (PyTorch's grad mode); on by default.
bool grad_mode_enabled();
// Turns recording on or off on this thread (torch.set_grad_enabled); NoGradGuard scopes it.
void set_grad_enabled(bool enabled);

// Turns recording off for its scope on this thread, as torch.no_grad().
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// True when grad mode is on and any input requires a gradient.
bool any_requires_grad(std::initializer_list<const Tensor*> inputs);

// Attaches a node to `output` (which becomes a non-leaf requiring a gradient) when any of
// `inputs` requires one; the backward receives the gradient of `output`. Returns output.
Tensor record(const std::string& name, Tensor output, const std::vector<const Tensor*>& inputs,
              std::function<std::vector<Tensor>(const Tensor&)> backward);

// Runs the backward from `root` with d(root) = grad_root (see Tensor::backward).
void run_backward(const Tensor& root, const Tensor& grad_root, bool retain_graph);

// torch.autograd.grad: the gradients of `outputs` (weighted by grad_outputs, which may be empty
// for one-element outputs) with respect to `inputs`, returned rather than accumulated in any
// .grad. An input the outputs do not depend on gives an undefined tensor when allow_unused,
// else ValueError. The graph is freed after, unless retain_graph.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool allow_unused = false);

// Tensor.register_hook: `hook` sees (and may replace) the gradient of `t` in every backward.
void register_hook(const Tensor& t, Hook hook);
// Tensor.retain_grad: a non-leaf keeps its gradient in grad() after a backward (a no-op on leaves).
void retain_grad(const Tensor& t);

}  // namespace kael::autograd
