#include "train/dist/gradient_reducer.hpp"

#include <algorithm>
#include <chrono>
#include <unordered_set>
#include <utility>
#include <vector>

#include "kael/core/error.hpp"
#include "kael/tensor/autograd.hpp"
#include "train/dist/world.hpp"
#include "train/net/gpt_net.hpp"

namespace kael::train::dist {

namespace {
// Between two polls of an unfinished sum: a poll copies what has arrived, so a shorter sleep
// finishes a sum sooner and takes more of the CPU the backward runs on.
constexpr auto kPollInterval = std::chrono::microseconds(50);
}  // namespace

// Touched by the hooks on the backward's thread and by arm() / finish() on the step's, which
// runs the backward itself, so by one thread at a time.
struct GradientReducer::Buckets {
  struct Slot {
    std::size_t bucket = 0;
    bool complete = false;
    Tensor parameter;
    Tensor grad;  // the complete gradient, held from its hook until its bucket is copied
  };
  struct Bucket {
    std::vector<std::size_t> slots;
    std::vector<float> buffer;  // the slots' gradients, one after another
    std::size_t complete = 0;
  };
  std::vector<Slot> slots;      // in checkpoint order
  std::vector<Bucket> buckets;  // in the order they are queued
  std::size_t next = 0;         // the first bucket not yet queued
  bool armed = false;
  GradientReducer* owner = nullptr;
  // A tied wte (slot 0): the embedding's part of the last micro-batch, kept apart.
  bool tied = false;
  std::int64_t C = 0;
  std::vector<std::int32_t> inputs;  // (B, T) this rank's ids of the last micro-batch
  std::vector<float> rows;           // (B*T, C): row i that of input i's first occurrence, else 0
  bool rows_taken = false;

  void ready(std::size_t i, const Tensor& grad) {
    Slot& slot = slots[i];
    slot.complete = true;
    slot.grad = grad;
    ++buckets[slot.bucket].complete;
    owner->submit_ready();
  }

  // The embedding's gradient of wte (V, C), whose nonzero rows are those of `inputs`.
  void take_rows(const Tensor& embedding_grad) {
    const Tensor g = embedding_grad.contiguous();
    const float* data = g.data<float>();
    rows.assign(inputs.size() * static_cast<std::size_t>(C), 0.0f);
    std::unordered_set<std::int32_t> seen;
    for (std::size_t i = 0; i < inputs.size(); ++i)
      if (seen.insert(inputs[i]).second)
        std::copy_n(data + static_cast<std::int64_t>(inputs[i]) * C, C, rows.begin() + static_cast<std::ptrdiff_t>(i) * C);
    rows_taken = true;
  }
};

GradientReducer::GradientReducer(GptNet& model) {
  if (world().size == 1) return;
  buckets_ = std::make_shared<Buckets>();
  Buckets& b = *buckets_;
  b.owner = this;
  auto& parameters = model.parameters();
  b.slots.resize(parameters.size());
  b.tied = model.config().tie_word_embeddings && parameters.front().name == "transformer.wte.weight";
  b.C = model.config().n_embd;
  const auto place = [&](std::size_t k, bool fresh) {
    if (fresh) b.buckets.emplace_back();
    b.buckets.back().slots.push_back(k);
    b.slots[k].bucket = b.buckets.size() - 1;
    b.slots[k].parameter = parameters[k].tensor;
  };
  if (b.tied) place(0, true);  // alone and first: complete as soon as the head's part is in
  std::int64_t filled = kBucketFloats;
  for (std::size_t k = parameters.size(); k-- > (b.tied ? 1 : 0);) {  // the backward's order
    const std::int64_t n = parameters[k].tensor.numel();
    const bool fresh = filled + n > kBucketFloats && filled > 0;
    if (fresh) filled = 0;
    place(k, fresh);
    filled += n;
  }
  for (Buckets::Bucket& bucket : b.buckets) {
    std::int64_t floats = 0;
    for (const std::size_t k : bucket.slots) floats += parameters[k].tensor.numel();
    bucket.buffer.resize(static_cast<std::size_t>(floats));
  }
  const std::weak_ptr<Buckets> weak = buckets_;
  for (std::size_t k = 0; k < parameters.size(); ++k)
    autograd::register_post_accumulate_grad_hook(parameters[k].tensor, [weak, k](const Tensor& grad) {
      const auto held = weak.lock();
      if (held && held->armed && !held->slots[k].complete) held->ready(k, grad);
    });
  if (b.tied)  // the tied wte's second part in a backward is the embedding's
    autograd::register_hook(parameters.front().tensor, [weak](const Tensor& gradient) {
      const auto held = weak.lock();
      if (held && held->armed && held->slots[0].complete && !held->rows_taken) held->take_rows(gradient);
      return Tensor();
    });
  thread_ = std::thread([this] { loop(); });
}

GradientReducer::~GradientReducer() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    // A step that failed half-way leaves sums the other ranks may never join: end the run
    // rather than wait for them forever.
    if (in_flight_ > 0) abort_run();
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void GradientReducer::arm(std::span<const std::int32_t> inputs) {
  if (!buckets_) return;
  Buckets& b = *buckets_;
  for (Buckets::Slot& slot : b.slots) slot.complete = false;
  for (Buckets::Bucket& bucket : b.buckets) bucket.complete = 0;
  b.next = 0;
  b.inputs.assign(inputs.begin(), inputs.end());
  b.rows.assign(b.inputs.size() * static_cast<std::size_t>(b.C), 0.0f);
  b.rows_taken = false;
  b.armed = true;
}

void GradientReducer::submit_ready() {
  Buckets& b = *buckets_;
  while (b.next < b.buckets.size() && b.buckets[b.next].complete == b.buckets[b.next].slots.size()) {
    Buckets::Bucket& bucket = b.buckets[b.next++];
    float* out = bucket.buffer.data();
    for (const std::size_t k : bucket.slots) {
      Tensor& grad = b.slots[k].grad;
      out = std::copy_n(grad.data<float>(), grad.numel(), out);
      grad = Tensor();  // so a later part (a tied wte's embedding) may still be added in place
    }
    submit(bucket.buffer);
  }
}

void GradientReducer::finish() {
  if (!buckets_) return;
  Buckets& b = *buckets_;
  b.armed = false;
  // The backward is over, so every gradient is complete: one whose hook did not run (never
  // expected) is taken as it is.
  for (std::size_t k = 0; k < b.slots.size(); ++k) {
    Buckets::Slot& slot = b.slots[k];
    if (slot.complete) continue;
    const Tensor grad = slot.parameter.grad();
    if (!grad.defined()) throw Error("GradientReducer: a parameter received no gradient in the step's last backward");
    b.ready(k, grad);
  }
  wait();
  for (Buckets::Bucket& bucket : b.buckets) {
    const float* in = bucket.buffer.data();
    for (const std::size_t k : bucket.slots) {
      Tensor grad = b.slots[k].parameter.grad();  // the parameter's gradient now (a tied wte's may be a new tensor)
      std::copy_n(in, grad.numel(), grad.data<float>());
      grad.bump_version();
      in += grad.numel();
    }
  }
  if (!b.tied) return;
  // Every rank's embedding rows, rank by rank: the global batch's row order.
  const std::vector<std::int32_t> all_inputs = gather(std::span<const std::int32_t>(b.inputs));
  const std::vector<float> all_rows = gather(std::span<const float>(b.rows));
  Tensor wte = b.slots[0].parameter.grad();
  float* data = wte.data<float>();
  for (std::size_t i = 0; i < all_inputs.size(); ++i) {
    float* row = data + static_cast<std::int64_t>(all_inputs[i]) * b.C;
    const float* add = all_rows.data() + static_cast<std::ptrdiff_t>(i) * b.C;
    for (std::int64_t c = 0; c < b.C; ++c) row[c] += add[c];
  }
  wte.bump_version();
}

void GradientReducer::submit(std::span<float> gradients) {
  if (!thread_.joinable() || gradients.empty()) return;
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(gradients);
    ++in_flight_;
  }
  changed_.notify_all();
}

void GradientReducer::wait() {
  if (!thread_.joinable()) return;
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return in_flight_ == 0; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void GradientReducer::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    const std::span<float> gradients = queue_.front();
    queue_.pop_front();
    const bool failed = error_ != nullptr;  // after a failed sum the rest are skipped
    lock.unlock();
    try {
      if (!failed) sum_polling(gradients, kPollInterval);
    } catch (...) {
      lock.lock();
      error_ = std::current_exception();
      lock.unlock();
    }
    lock.lock();
    --in_flight_;
    changed_.notify_all();
  }
}

}  // namespace kael::train::dist
