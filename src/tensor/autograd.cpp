#include "kael/tensor/autograd.hpp"

#include <unordered_map>
#include <unordered_set>

#include "kael/tensor/ops.hpp"
#include "tensor/strided.hpp"

namespace kael::autograd {

namespace {
thread_local bool grad_mode = true;
}

bool grad_mode_enabled() { return grad_mode; }
void set_grad_enabled(bool enabled) { grad_mode = enabled; }

NoGradGuard::NoGradGuard() : previous_(grad_mode) { grad_mode = false; }
NoGradGuard::~NoGradGuard() { grad_mode = previous_; }

const Tensor& SavedTensor::get(const std::string& op) const {
  if (tensor_.version() != version_)
    throw ValueError(str("one of the tensors needed for the backward of ", op,
                         " has been modified by an in-place operation (version ", version_, " when saved, now ",
                         tensor_.version(), ")"));
  return tensor_;
}

bool any_requires_grad(std::initializer_list<const Tensor*> inputs) {
  if (!grad_mode) return false;
  for (const Tensor* t : inputs)
    if (t->requires_grad()) return true;
  return false;
}

Tensor Meta::grad() const {
  const std::lock_guard lock(mutex_);
  return grad_;
}

void Meta::set_grad(Tensor grad) {
  const std::lock_guard lock(mutex_);
  grad_ = std::move(grad);
}

void Meta::accumulate_grad(const Tensor& gradient) {
  const std::lock_guard lock(mutex_);
  grad_ = grad_.defined() ? add(grad_, gradient).detach() : tensor_detail::dense_copy(gradient);
}

Node::Node(std::string name, std::vector<std::shared_ptr<Meta>> inputs, BackwardFn backward)
    : name(std::move(name)), inputs_(std::move(inputs)), backward_(std::move(backward)) {}

// torch's deleteNode: each node popped here has its inputs taken before it dies at the end of
// the iteration, so its own ~Node finds nothing to free and the depth stays one.
Node::~Node() {
  std::vector<std::shared_ptr<Node>> stack;
  release_inputs(stack);
  while (!stack.empty()) {
    const std::shared_ptr<Node> node = std::move(stack.back());
    stack.pop_back();
    node->release_inputs(stack);
  }
}

void Node::release_inputs(std::vector<std::shared_ptr<Node>>& stack) {
  for (auto& input : inputs_) {
    // A count of one cannot grow under us: nothing else holds the pointer to copy it (the
    // library keeps no weak_ptr to a Meta or a Node). A count above one may fall to zero on
    // another thread, whose own ~Node then frees the rest of the chain the same way.
    if (input && input.use_count() == 1 && input->grad_fn && input->grad_fn.use_count() == 1)
      stack.push_back(std::move(input->grad_fn));
    input.reset();
  }
  inputs_.clear();
}

std::vector<Tensor> Node::apply(const Tensor& grad_output, bool retain_graph) {
  const std::lock_guard lock(mutex_);
  if (!backward_)
    throw ValueError(str("backward through the graph a second time (at ", name,
                         "): its saved values were freed by the first backward; pass retain_graph = true to keep them"));
  std::vector<Tensor> grads = backward_(grad_output);
  if (!retain_graph) backward_ = nullptr;  // frees the saved tensors
  return grads;
}

Tensor record(const std::string& name, Tensor output, const std::vector<const Tensor*>& inputs, BackwardFn backward) {
  if (!grad_mode) return output;
  std::vector<std::shared_ptr<Meta>> metas;
  metas.reserve(inputs.size());
  bool needed = false;
  for (const Tensor* input : inputs) {
    const bool wanted = input->requires_grad();
    metas.push_back(wanted ? input->autograd_meta() : nullptr);
    needed = needed || wanted;
  }
  if (!needed) return output;
  auto meta = std::make_shared<Meta>();
  meta->requires_grad = true;
  meta->grad_fn = std::make_shared<Node>(name, std::move(metas), std::move(backward));
  output.set_autograd_meta(std::move(meta));
  return output;
}

namespace {

// Nodes reachable from `root`, each after every node that consumes its output.
std::vector<Node*> topological_order(Node* root) {
  std::vector<Node*> order;
  std::unordered_set<Node*> seen;
  // Iterative post-order DFS: deep graphs (long training loops) must not overflow the stack.
  std::vector<std::pair<Node*, std::size_t>> stack{{root, 0}};
  seen.insert(root);
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->inputs().size()) {
      const auto& input = node->inputs()[next++];
      if (input && input->grad_fn && seen.insert(input->grad_fn.get()).second)
        stack.emplace_back(input->grad_fn.get(), 0);
    } else {
      order.push_back(node);
      stack.pop_back();
    }
  }
  return {order.rbegin(), order.rend()};
}

}  // namespace

void run_backward(const Tensor& root, const Tensor& grad_root, bool retain_graph) {
  const auto& root_meta = root.autograd_meta();
  if (!root_meta || !root_meta->requires_grad)
    throw ValueError("backward: the tensor does not require a gradient and has no grad_fn");
  NoGradGuard no_grad;  // the backward's own arithmetic records nothing
  if (!root_meta->grad_fn) {
    root_meta->accumulate_grad(grad_root);
    return;
  }
  std::unordered_map<Node*, Tensor> pending;
  pending[root_meta->grad_fn.get()] = grad_root;
  for (Node* node : topological_order(root_meta->grad_fn.get())) {
    auto found = pending.find(node);
    if (found == pending.end()) continue;
    const Tensor grad_output = std::move(found->second);
    pending.erase(found);
    const std::vector<Tensor> grads = node->apply(grad_output, retain_graph);
    for (std::size_t i = 0; i < node->inputs().size(); ++i) {
      const auto& input = node->inputs()[i];
      if (!input || i >= grads.size() || !grads[i].defined()) continue;
      if (input->grad_fn) {
        auto [slot, fresh] = pending.try_emplace(input->grad_fn.get(), grads[i]);
        if (!fresh) slot->second = add(slot->second, grads[i]);
      } else {
        input->accumulate_grad(grads[i]);
      }
    }
  }
}

}  // namespace kael::autograd
