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

namespace {

// The gradients autograd::grad asks for: filled instead of accumulating into any leaf.
struct Capture {
  std::unordered_map<const Meta*, Tensor> grads;  // the inputs asked for, by their state
};

Tensor run_hooks(const std::vector<Hook>& hooks, Tensor gradient) {
  for (const Hook& hook : hooks) {
    Tensor replaced = hook(gradient);
    if (replaced.defined()) gradient = std::move(replaced);
  }
  return gradient;
}

void add_captured(Capture& capture, const Meta* meta, const Tensor& gradient) {
  auto found = capture.grads.find(meta);
  if (found == capture.grads.end()) return;
  found->second = found->second.defined() ? add(found->second, gradient).detach() : gradient;
}

// The backward from `root_node` with d(its output) = grad_root. Without `capture` the leaves'
// gradients accumulate in their grad; with it only the asked-for inputs' are kept, there.
void execute(Node* root_node, const Tensor& grad_root, bool retain_graph, Capture* capture) {
  std::unordered_map<Node*, Tensor> pending;
  pending[root_node] = grad_root;
  std::unordered_map<const Node*, const Meta*> captured_outputs;  // non-leaf inputs asked for
  if (capture)
    for (const auto& [meta, unused] : capture->grads)
      if (meta->grad_fn) captured_outputs[meta->grad_fn.get()] = meta;
  for (Node* node : topological_order(root_node)) {
    auto found = pending.find(node);
    if (found == pending.end()) continue;
    if (node->released)
      throw ValueError(str("backward through the graph a second time (at ", node->name,
                           "): its saved values were freed by the first backward; pass retain_graph = true to keep them"));
    const Tensor grad_output = run_hooks(node->pre_hooks, std::move(found->second));
    pending.erase(found);
    if (auto kept = node->retained.lock()) accumulate(kept->grad, grad_output);
    if (capture) {
      if (auto out = captured_outputs.find(node); out != captured_outputs.end()) add_captured(*capture, out->second, grad_output);
    }
    std::vector<Tensor> grads = node->backward(grad_output);
    for (std::size_t i = 0; i < node->inputs.size(); ++i) {
      const auto& input = node->inputs[i];
      if (!input || i >= grads.size() || !grads[i].defined()) continue;
      if (input->grad_fn) {
        auto [slot, fresh] = pending.try_emplace(input->grad_fn.get(), grads[i]);
        if (!fresh) slot->second = add(slot->second, grads[i]);
      } else if (capture) {
        add_captured(*capture, input.get(), run_hooks(input->hooks, grads[i]));
      } else {
        accumulate(input->grad, run_hooks(input->hooks, grads[i]));
      }
    }
    if (!retain_graph) {
      node->backward = nullptr;  // frees the saved tensors
      node->released = true;
    }
  }
}

}  // namespace

void run_backward(const Tensor& root, const Tensor& grad_root, bool retain_graph) {
  const auto& root_meta = root.autograd_meta();
  if (!root_meta || !root_meta->requires_grad)
    throw ValueError("backward: the tensor does not require a gradient and has no grad_fn");
  NoGradGuard no_grad;  // the backward's own arithmetic records nothing
  if (!root_meta->grad_fn) {
    accumulate(root_meta->grad, run_hooks(root_meta->hooks, grad_root));
    return;
  }
  execute(root_meta->grad_fn.get(), grad_root, retain_graph, nullptr);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph, bool allow_unused) {
  if (outputs.empty()) throw ValueError("grad: no outputs given");
  if (!grad_outputs.empty() && grad_outputs.size() != outputs.size())
    throw ValueError(str("grad: ", grad_outputs.size(), " grad_outputs for ", outputs.size(), " outputs"));
  Capture capture;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].requires_grad())
      throw ValueError(str("grad: input ", i, " does not require a gradient"));
    capture.grads.emplace(inputs[i].autograd_meta().get(), Tensor());
  }
  // One node joins the outputs, so that a single walk from it reaches all of them in order.
  auto join = std::make_shared<Node>();
  join->name = "grad";
  std::vector<Tensor> seeds;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    if (!out.requires_grad()) throw ValueError(str("grad: output ", i, " does not require a gradient and has no grad_fn"));
    Tensor seed = grad_outputs.empty() ? Tensor() : grad_outputs[i];
    if (!seed.defined()) {
      if (out.numel() != 1)
        throw ValueError(str("grad: the gradient can be implied only for one-element outputs; output ", i, " has shape ",
                             shape_to_string(out.shape())));
      seed = ones(out.shape(), out.dtype());
    } else if (seed.shape() != out.shape()) {
      throw ValueError(str("grad: grad_outputs[", i, "] has shape ", shape_to_string(seed.shape()), ", the output ",
                           shape_to_string(out.shape())));
    }
    join->inputs.push_back(out.autograd_meta());
    seeds.push_back(seed.detach());
  }
  join->backward = [seeds](const Tensor&) { return seeds; };
  {
    NoGradGuard no_grad;
    execute(join.get(), Tensor(), retain_graph, &capture);
  }
  std::vector<Tensor> result;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    Tensor g = capture.grads.at(inputs[i].autograd_meta().get());
    if (!g.defined() && !allow_unused)
      throw ValueError(str("grad: input ", i, " was not used in the graph of the outputs (pass allow_unused=True)"));
    result.push_back(g);
  }
  return result;
}

void register_hook(const Tensor& t, Hook hook) {
  const auto& meta = t.autograd_meta();
  if (!meta || !meta->requires_grad)
    throw ValueError("register_hook: cannot register a hook on a tensor that does not require a gradient");
  if (meta->grad_fn) meta->grad_fn->pre_hooks.push_back(std::move(hook));
  else meta->hooks.push_back(std::move(hook));
}

void retain_grad(const Tensor& t) {
  const auto& meta = t.autograd_meta();
  if (!meta || !meta->requires_grad)
    throw ValueError("retain_grad: cannot retain the gradient of a tensor that does not require one");
  if (!meta->grad_fn) return;  // leaves keep theirs anyway
  meta->grad_fn->retained = meta;  // weak: the node must not keep its own output's state alive
}

}  // namespace kael::autograd
