// Reverse-mode automatic differentiation, as PyTorch's autograd: every differentiable op run on
// tensors that require a gradient records a Node holding what its backward needs; backward()
// walks the nodes from the output in reverse topological order and accumulates the gradients
// of the leaves. Saved tensors remember their version: writing one in place before the
// backward that needs it is an error naming the op, never a silent wrong gradient.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kael/core/tensor.hpp"

namespace kael::autograd {

struct Node;

// A gradient hook (Tensor.register_hook): called with the gradient of its tensor; a defined
// result replaces that gradient, an undefined one leaves it.
using Hook = std::function<Tensor(const Tensor&)>;
// A leaf's post-accumulate hook (Tensor.register_post_accumulate_grad_hook): called with the
// leaf's gradient each time a backward has added a contribution to it.
using PostAccumulateHook = std::function<void(const Tensor& grad)>;

// The autograd state of one tensor (shared by its copies). requires_grad and grad_fn are set
// before the tensor is shared; the gradient and the hooks may be read, accumulated and added
// by backwards running on several threads at once, so they live behind a lock (torch locks
// them the same way). Hooks run on a copy of the list, outside the lock.
struct Meta {
  std::atomic<bool> requires_grad = false;
  std::shared_ptr<Node> grad_fn;  // non-leaves: the op that produced the tensor; never reassigned

  // Leaves: the accumulated gradient (undefined until a backward reaches the leaf); non-leaves:
  // kept by retain_grad.
  Tensor grad() const;
  // Replaces the gradient as is (Tensor::set_grad checks dtype and shape first).
  void set_grad(Tensor grad);
  // grad += gradient; a tensor that grad() returned earlier keeps its values, and the first
  // gradient is never aliased by anyone else. A gradient that no other tensor shares becomes the
  // grad as is, and one is added in place into a grad that no other tensor shares (neither can
  // be seen); otherwise a copy and an out-of-place add, as torch's AccumulateGrad.
  void accumulate_grad(Tensor gradient);

  // A leaf's hooks (a non-leaf's live on its grad_fn): added, and copied to be run.
  void add_hook(Hook hook);
  std::vector<Hook> hooks() const;
  // A leaf's post-accumulate hooks: added, and run (outside the lock) after accumulate_grad.
  void add_post_accumulate_hook(PostAccumulateHook hook);
  void run_post_accumulate_hooks() const;

  // An in-place op gave the tensor that held this state new history (the handle took a new
  // Meta, this one keeps the values from before the write). Views taken before the write
  // still point here: their backward is then an error naming `op` (record's stale_history).
  void mark_written_in_place(const char* op);
  // The op that wrote the tensor in place after this state was its history, or null.
  const char* written_in_place_by() const { return written_by_.load(); }

 private:
  mutable std::mutex mutex_;
  Tensor grad_;
  std::vector<Hook> hooks_;
  std::vector<PostAccumulateHook> post_hooks_;
  std::atomic<const char*> written_by_ = nullptr;
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

// From the gradient of an op's output to the gradients of its inputs (an undefined Tensor
// where an input needs none). Captures only values without history (SavedTensor, detached
// or integer tensors), so the graph's only links are Node::inputs.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;

// A view's backward done in place (slice's): adds g, the gradient of the view, into base_grad,
// the gradient its single input has gathered so far, where the view took it; false when it
// cannot, and the backward runs. The pieces of a split then fill one gradient of the whole,
// where each backward would make zeros of the whole shape and the pieces would be added up.
using AddIntoFn = std::function<bool(Tensor& base_grad, const Tensor& g)>;

// One recorded op: its inputs' autograd state and its backward.
struct Node {
  Node(std::string name, std::vector<std::shared_ptr<Meta>> inputs, BackwardFn backward, bool view = false,
       AddIntoFn add_into = {});
  // Frees the nodes that only this one kept alive, and theirs, in a loop: a graph a million
  // ops deep would overflow the stack if each ~Node freed the next by recursion.
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  const std::string name;  // the op, for error messages ("mul", "matmul", ...)
  // The output shares its single input's bytes (view, select, slice, ...): in-place writes
  // check it, and so does a backward through a view whose base was written after.
  const bool view;
  // Null for inputs that need no gradient. Fixed at construction.
  const std::vector<std::shared_ptr<Meta>>& inputs() const { return inputs_; }
  // The gradients of the inputs from that of the output. Backwards through a shared graph
  // take turns here, so none sees the saved values half freed; without retain_graph the
  // saved values are freed after, and a later call is a ValueError naming the op.
  std::vector<Tensor> apply(const Tensor& grad_output, bool retain_graph);
  // apply() as AddIntoFn, into base_grad, when the node has one and it accepts: true if done.
  bool apply_into(Tensor& base_grad, const Tensor& grad_output, bool retain_graph);

  // Hooks on the gradient of the output (register_hook on a non-leaf), run before apply, on a
  // copy taken under the lock.
  void add_pre_hook(Hook hook);
  std::vector<Hook> pre_hooks() const;
  // retain_grad: the output whose state keeps its gradient (after the hooks). Weak, so the node
  // never keeps its own output's state alive; locked only by a backward running this node,
  // which reached it through strong links.
  void set_retained(const std::shared_ptr<Meta>& output);
  std::shared_ptr<Meta> retained() const;
  // A view's: the state of the tensor that owns the bytes (through views of views), which an
  // in-place write of it marks; alive as long as this node (inputs() leads to it). Else null.
  const Meta* view_base() const { return view_base_; }

 private:
  // Moves the inputs whose node nothing else holds onto `stack`, and drops the rest.
  void release_inputs(std::vector<std::shared_ptr<Node>>& stack);

  std::vector<std::shared_ptr<Meta>> inputs_;
  std::mutex mutex_;  // held through apply
  BackwardFn backward_;  // empty once a backward without retain_graph ran
  AddIntoFn add_into_;
  mutable std::mutex hooks_mutex_;  // apart from mutex_: a hook may register another
  std::vector<Hook> pre_hooks_;
  std::weak_ptr<Meta> retained_;
  const Meta* view_base_ = nullptr;
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
// A view op passes view = true (its output shares the single input's bytes), and may pass its
// backward in place.
Tensor record(const std::string& name, Tensor output, const std::vector<const Tensor*>& inputs, BackwardFn backward,
              bool view = false, AddIntoFn add_into = {});

// Runs the backward from `root` with d(root) = grad_root (see Tensor::backward). Safe to call
// on several threads at once, on graphs that share leaves or nodes (docs/tensor.md, "Threads").
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
// Tensor.register_post_accumulate_grad_hook: `hook` runs with the accumulated gradient of the
// leaf `t` after each contribution a backward adds to it (a leaf used twice in a graph, as a tied
// embedding, gets two calls). For a data-parallel trainer that sums each gradient over its ranks
// once it is complete, while the backward goes on. ValueError for a non-leaf or a tensor that
// does not require a gradient.
void register_post_accumulate_grad_hook(const Tensor& t, PostAccumulateHook hook);
// Tensor.retain_grad: a non-leaf keeps its gradient in grad() after a backward (a no-op on leaves).
void retain_grad(const Tensor& t);

}  // namespace kael::autograd
