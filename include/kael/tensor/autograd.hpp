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

// The autograd state of one tensor (shared by its copies).
struct Meta {
  bool requires_grad = false;
  Tensor grad;                     // leaves: the accumulated gradient
  std::shared_ptr<Node> grad_fn;   // non-leaves: the op that produced the tensor
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

}  // namespace kael::autograd
