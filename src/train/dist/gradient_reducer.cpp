#include "train/dist/gradient_reducer.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

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
// call backward themselves, so one thread at a time.
struct GradientReducer::Buckets {
  struct Slot {
    std::size_t bucket = 0;
    int uses = 1;  // contributions per backward (2 for a tied wte: embedding and head)
    int seen = 0;
    Tensor parameter;
    Tensor grad;   // the complete gradient, held until finish()
  };
  struct Bucket {
    std::vector<std::size_t> slots;
    std::vector<float> buffer;  // the slots' gradients, one after another
    std::size_t complete = 0;
    bool queued = false;
  };
  std::vector<Slot> slots;      // in checkpoint order
  std::vector<Bucket> buckets;  // in the order they are queued
  std::size_t next = 0;         // the first bucket not yet queued
  bool armed = false;
  GradientReducer* owner = nullptr;

  // Slot i's gradient is complete: it joins its bucket, and every bucket from `next` on that is
  // complete is queued, in order.
  void ready(std::size_t i, const Tensor& grad) {
    Slot& slot = slots[i];
    slot.grad = grad;
    ++buckets[slot.bucket].complete;
    owner->submit_ready();
  }
};

GradientReducer::GradientReducer(GptNet& model) {
  if (world().size == 1) return;
  buckets_ = std::make_shared<Buckets>();
  Buckets& b = *buckets_;
  b.owner = this;
  auto& parameters = model.parameters();
  b.slots.resize(parameters.size());
  std::int64_t filled = kBucketFloats;
  for (std::size_t k = parameters.size(); k-- > 0;) {  // the backward's order
    const std::int64_t n = parameters[k].tensor.numel();
    if (filled + n > kBucketFloats && filled > 0) {
      b.buckets.emplace_back();
      filled = 0;
    }
    b.buckets.back().slots.push_back(k);
    filled += n;
    b.slots[k].bucket = b.buckets.size() - 1;
    b.slots[k].parameter = parameters[k].tensor;
    b.slots[k].uses = parameters[k].name == "transformer.wte.weight" && model.config().tie_word_embeddings ? 2 : 1;
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
      if (!held || !held->armed) return;
      Buckets::Slot& slot = held->slots[k];
      if (++slot.seen == slot.uses) held->ready(k, grad);
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

void GradientReducer::arm() {
  if (!buckets_) return;
  Buckets& b = *buckets_;
  for (Buckets::Slot& slot : b.slots) slot.seen = 0;
  for (Buckets::Bucket& bucket : b.buckets) {
    bucket.complete = 0;
    bucket.queued = false;
  }
  b.next = 0;
  b.armed = true;
}

void GradientReducer::submit_ready() {
  Buckets& b = *buckets_;
  while (b.next < b.buckets.size() && b.buckets[b.next].complete == b.buckets[b.next].slots.size()) {
    Buckets::Bucket& bucket = b.buckets[b.next++];
    float* out = bucket.buffer.data();
    for (const std::size_t k : bucket.slots) {
      const Tensor& grad = b.slots[k].grad;
      out = std::copy_n(grad.data<float>(), grad.numel(), out);
    }
    bucket.queued = true;
    submit(bucket.buffer);
  }
}

void GradientReducer::finish() {
  if (!buckets_) return;
  Buckets& b = *buckets_;
  b.armed = false;
  // The backward is over, so every gradient is complete: one the hooks did not count as
  // complete (never expected) is taken as it is.
  for (std::size_t k = 0; k < b.slots.size(); ++k) {
    Buckets::Slot& slot = b.slots[k];
    if (slot.seen >= slot.uses) continue;
    slot.grad = slot.parameter.grad();
    if (!slot.grad.defined()) throw Error("GradientReducer: a parameter received no gradient in the step's last backward");
    slot.seen = slot.uses;
    ++b.buckets[slot.bucket].complete;
  }
  submit_ready();
  wait();
  for (Buckets::Bucket& bucket : b.buckets) {
    const float* in = bucket.buffer.data();
    for (const std::size_t k : bucket.slots) {
      Tensor& grad = b.slots[k].grad;
      std::copy_n(in, grad.numel(), grad.data<float>());
      grad.bump_version();
      in += grad.numel();
      grad = Tensor();  // the parameter keeps it; zero_grad frees it
    }
  }
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
