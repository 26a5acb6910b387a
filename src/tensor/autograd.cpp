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

Tensor record(const std::string& name, Tensor output, const std::vector<const Tensor*>& inputs,
              std::function<std::vector<Tensor>(const Tensor&)> backward) {
  if (!grad_mode) return output;
  auto node = std::make_shared<Node>();
  bool needed = false;
  for (const Tensor* input : inputs) {
    if (input->requires_grad()) {
      node->inputs.push_back(input->autograd_meta());
      needed = true;
    } else {
      node->inputs.push_back(nullptr);
    }
  }
  if (!needed) return output;
  node->name = name;
  node->backward = std::move(backward);
  auto meta = std::make_shared<Meta>();
  meta->requires_grad = true;
  meta->grad_fn = std::move(node);
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
    if (next < node->inputs.size()) {
      const auto& input = node->inputs[next++];
      if (input && input->grad_fn && seen.insert(input->grad_fn.get()).second)
        stack.emplace_back(input->grad_fn.get(), 0);
    } else {
      order.push_back(node);
      stack.pop_back();
    }
  }
  return {order.rbegin(), order.rend()};
}

void accumulate(Tensor& slot, const Tensor& gradient) {
  if (!slot.defined()) {
    slot = tensor_detail::dense_copy(gradient);  // never alias an op's value
  } else {
    slot = add(slot, gradient).detach();
  }
}

}  // namespace

void run_backward(const Tensor& root, const Tensor& grad_root, bool retain_graph) {
  const auto& root_meta = root.autograd_meta();
  if (!root_meta || !root_meta->requires_grad)
    throw ValueError("backward: the tensor does not require a gradient and has no grad_fn");
  NoGradGuard no_grad;  // the backward's own arithmetic records nothing
  if (!root_meta->grad_fn) {
    accumulate(root_meta->grad, grad_root);
    return;
  }
  std::unordered_map<Node*, Tensor> pending;
  pending[root_meta->grad_fn.get()] = grad_root;
  for (Node* node : topological_order(root_meta->grad_fn.get())) {
    auto found = pending.find(node);
    if (found == pending.end()) continue;
    if (node->released)
      throw ValueError(str("backward through the graph a second time (at ", node->name,
                           "): its saved values were freed by the first backward; pass retain_graph = true to keep them"));
    const Tensor grad_output = std::move(found->second);
    pending.erase(found);
    std::vector<Tensor> grads = node->backward(grad_output);
    for (std::size_t i = 0; i < node->inputs.size(); ++i) {
      const auto& input = node->inputs[i];
      if (!input || i >= grads.size() || !grads[i].defined()) continue;
      if (input->grad_fn) {
        auto [slot, fresh] = pending.try_emplace(input->grad_fn.get(), grads[i]);
        if (!fresh) slot->second = add(slot->second, grads[i]);
      } else {
        accumulate(input->grad, grads[i]);
      }
    }
    if (!retain_graph) {
      node->backward = nullptr;  // frees the saved tensors
      node->released = true;
    }
  }
}

}  // namespace kael::autograd
