#include "kael/tensor/autograd.hpp"

#include <unordered_map>
#include <unordered_set>

#include "kael/tensor/ops.hpp"
#include "kernels/elementwise.hpp"
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

namespace {

// sum += gradient: in place where no other tensor shares sum's bytes (none can see the write),
// out of place otherwise. Each sum rounded as add's (x + y in F32): the values are the same.
void add_gradient(Tensor& sum, const Tensor& gradient) {
  if (sum.dtype() == DType::F32 && gradient.dtype() == DType::F32 && sum.shape() == gradient.shape() &&
      gradient.is_contiguous() && sum.owns_dense_storage_alone() && sum.device() == gradient.device() &&
      sum.device().type == Device::Type::cpu) {
    kernels::add(sum.data<float>(), sum.data<float>(), gradient.data<float>(), sum.numel());
    sum.bump_version();
    return;
  }
  sum = add(sum, gradient).detach();
}

}  // namespace

void Meta::accumulate_grad(Tensor gradient) {
  const std::lock_guard lock(mutex_);
  if (!grad_.defined()) {
    // A big weight's gradient is a fresh product: copying it would cost a pass over memory and
    // a fresh mapping every step.
    grad_ = gradient.owns_dense_storage_alone() && !gradient.requires_grad() ? std::move(gradient)
                                                                               : tensor_detail::dense_copy(gradient);
    return;
  }
  add_gradient(grad_, gradient);
}

void Meta::add_hook(Hook hook) {
  const std::lock_guard lock(mutex_);
  hooks_.push_back(std::move(hook));
}

std::vector<Hook> Meta::hooks() const {
  const std::lock_guard lock(mutex_);
  return hooks_;
}

void Meta::add_post_accumulate_hook(PostAccumulateHook hook) {
  const std::lock_guard lock(mutex_);
  post_hooks_.push_back(std::move(hook));
}

void Meta::run_post_accumulate_hooks() const {
  std::vector<PostAccumulateHook> hooks;
  Tensor gradient;
  {
    const std::lock_guard lock(mutex_);
    if (post_hooks_.empty()) return;
    hooks = post_hooks_;
    gradient = grad_;
  }
  for (const PostAccumulateHook& hook : hooks) hook(gradient);
}

void Meta::mark_written_in_place(const char* op) { written_by_.store(op); }

Node::Node(std::string name, std::vector<std::shared_ptr<Meta>> inputs, BackwardFn backward, bool view,
           AddIntoFn add_into)
    : name(std::move(name)),
      view(view),
      inputs_(std::move(inputs)),
      backward_(std::move(backward)),
      add_into_(std::move(add_into)) {
  if (view && !inputs_.empty() && inputs_[0]) {
    const Node* inner = inputs_[0]->grad_fn.get();
    view_base_ = inner && inner->view && inner->view_base_ ? inner->view_base_ : inputs_[0].get();
  }
}

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
    // A count of one cannot grow under us: nothing else holds the pointer to copy it (the one
    // weak_ptr to a Meta, Node::retained_, is locked only by a backward that reached its node
    // through strong links, which this count says do not exist). A count above one may fall
    // to zero on another thread, whose own ~Node then frees the rest of the chain the same way.
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

bool Node::apply_into(Tensor& base_grad, const Tensor& grad_output, bool retain_graph) {
  const std::lock_guard lock(mutex_);
  if (!backward_ || !add_into_ || !add_into_(base_grad, grad_output)) return false;
  if (!retain_graph) backward_ = nullptr;  // as apply: a second backward is refused the same way
  return true;
}

void Node::add_pre_hook(Hook hook) {
  const std::lock_guard lock(hooks_mutex_);
  pre_hooks_.push_back(std::move(hook));
}

std::vector<Hook> Node::pre_hooks() const {
  const std::lock_guard lock(hooks_mutex_);
  return pre_hooks_;
}

void Node::set_retained(const std::shared_ptr<Meta>& output) {
  const std::lock_guard lock(hooks_mutex_);
  retained_ = output;
}

std::shared_ptr<Meta> Node::retained() const {
  const std::lock_guard lock(hooks_mutex_);
  return retained_.lock();
}

namespace {

// Why a tensor whose autograd state is `meta` no longer holds the values its history
// computes, or "": an in-place op wrote the tensor (through another handle: a C++ copy) or the
// base of this view after the state was taken, and gave only the writing handle new history.
// torch rebases such a view's history; kael refuses its backward rather than give the
// gradient of the old values.
std::string stale_history(const Meta& meta) {
  if (const char* op = meta.written_in_place_by())
    return str("a tensor was modified in place by ", op, " through another handle after this one was taken, so its "
               "history is that of the old values; use the handle that was written");
  if (meta.grad_fn && meta.grad_fn->view && meta.grad_fn->view_base())
    if (const char* op = meta.grad_fn->view_base()->written_in_place_by())
      return str("a view (made by ", meta.grad_fn->name, ") was taken before its base was modified in place by ", op,
                 ", so its history is that of the old values; take the view after the in-place op");
  return {};
}

}  // namespace

Tensor record(const std::string& name, Tensor output, const std::vector<const Tensor*>& inputs, BackwardFn backward,
              bool view, AddIntoFn add_into) {
  if (!grad_mode) return output;
  std::vector<std::shared_ptr<Meta>> metas;
  metas.reserve(inputs.size());
  bool needed = false;
  std::string stale;
  for (const Tensor* input : inputs) {
    const bool wanted = input->requires_grad();
    metas.push_back(wanted ? input->autograd_meta() : nullptr);
    needed = needed || wanted;
    if (wanted && stale.empty()) stale = stale_history(*metas.back());
  }
  if (!needed) return output;
  // The forward stands (its values are right); its backward could not be, so it is an error.
  if (!stale.empty()) {
    backward = [message = str("backward of ", name, ": ", stale)](const Tensor&) -> std::vector<Tensor> {
      throw ValueError(message);
    };
    add_into = nullptr;
  }
  auto meta = std::make_shared<Meta>();
  meta->requires_grad = true;
  meta->grad_fn = std::make_shared<Node>(name, std::move(metas), std::move(backward), view, std::move(add_into));
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
    const Tensor grad_output = run_hooks(node->pre_hooks(), std::move(found->second));
    pending.erase(found);
    // A view whose input already has a pending gradient may add into it (split's pieces).
    const std::shared_ptr<Meta>* only = node->inputs().size() == 1 ? &node->inputs()[0] : nullptr;
    const auto base = only && *only && (*only)->grad_fn ? pending.find((*only)->grad_fn.get()) : pending.end();
    std::vector<Tensor> grads;
    if (base == pending.end() || !node->apply_into(base->second, grad_output, retain_graph))
      grads = node->apply(grad_output, retain_graph);
    if (auto kept = node->retained()) kept->accumulate_grad(grad_output);
    if (capture) {
      if (auto out = captured_outputs.find(node); out != captured_outputs.end()) add_captured(*capture, out->second, grad_output);
    }
    for (std::size_t i = 0; i < node->inputs().size(); ++i) {
      const auto& input = node->inputs()[i];
      if (!input || i >= grads.size() || !grads[i].defined()) continue;
      if (input->grad_fn) {
        auto [slot, fresh] = pending.try_emplace(input->grad_fn.get(), grads[i]);
        if (!fresh) add_gradient(slot->second, grads[i]);
      } else if (capture) {
        add_captured(*capture, input.get(), run_hooks(input->hooks(), grads[i]));
      } else {
        input->accumulate_grad(run_hooks(input->hooks(), std::move(grads[i])));
        input->run_post_accumulate_hooks();
      }
    }
  }
}

}  // namespace

void run_backward(const Tensor& root, const Tensor& grad_root, bool retain_graph) {
  const auto& root_meta = root.autograd_meta();
  if (!root_meta || !root_meta->requires_grad)
    throw ValueError("backward: the tensor does not require a gradient and has no grad_fn");
  NoGradGuard no_grad;  // the backward's own arithmetic records nothing
  if (const std::string stale = stale_history(*root_meta); !stale.empty()) throw ValueError(str("backward: ", stale));
  if (!root_meta->grad_fn) {
    root_meta->accumulate_grad(run_hooks(root_meta->hooks(), grad_root));
    root_meta->run_post_accumulate_hooks();
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
  std::vector<std::shared_ptr<Meta>> joined;
  std::vector<Tensor> seeds;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    if (!out.requires_grad()) throw ValueError(str("grad: output ", i, " does not require a gradient and has no grad_fn"));
    if (const std::string stale = stale_history(*out.autograd_meta()); !stale.empty())
      throw ValueError(str("grad: output ", i, ": ", stale));
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
    joined.push_back(out.autograd_meta());
    seeds.push_back(seed.detach());
  }
  const auto join = std::make_shared<Node>("grad", std::move(joined), [seeds](const Tensor&) { return seeds; });
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
  if (meta->grad_fn) meta->grad_fn->add_pre_hook(std::move(hook));
  else meta->add_hook(std::move(hook));
}

void register_post_accumulate_grad_hook(const Tensor& t, PostAccumulateHook hook) {
  const auto& meta = t.autograd_meta();
  if (!meta || !meta->requires_grad || meta->grad_fn)
    throw ValueError("register_post_accumulate_grad_hook: the tensor must be a leaf that requires a gradient");
  meta->add_post_accumulate_hook(std::move(hook));
}

void retain_grad(const Tensor& t) {
  const auto& meta = t.autograd_meta();
  if (!meta || !meta->requires_grad)
    throw ValueError("retain_grad: cannot retain the gradient of a tensor that does not require one");
  if (!meta->grad_fn) return;  // leaves keep theirs anyway
  meta->grad_fn->set_retained(meta);
}

}  // namespace kael::autograd
