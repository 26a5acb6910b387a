#include "train/dist/gradient_reducer.hpp"

#include <chrono>
#include <utility>
#include <vector>

#include "train/dist/world.hpp"

namespace kael::train::dist {

namespace {
// Between two polls of an unfinished sum: a poll copies what has arrived, so a shorter sleep
// finishes a sum sooner and takes more of the CPU the backward runs on.
constexpr auto kPollInterval = std::chrono::microseconds(50);
}  // namespace

GradientReducer::GradientReducer() {
  if (world().size > 1) thread_ = std::thread([this] { loop(); });
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

void GradientReducer::attach(TrainableGPT2& model) {
  if (!thread_.joinable()) return;
  model.set_gradients_ready([this](std::span<float> gradients) { submit(gradients); });
  model.set_keep_embedding_rows(true);
}

void GradientReducer::finish(TrainableGPT2& model, std::span<const std::int32_t> inputs) {
  if (!thread_.joinable()) return;
  model.set_gradients_ready({});
  wait();  // before any other collective: one thread calls MPI at a time
  const std::vector<std::int32_t> all_inputs = gather(inputs);
  const std::vector<float> all_rows = gather(model.kept_embedding_rows());
  model.set_keep_embedding_rows(false);
  model.add_embedding_rows(all_inputs, all_rows);  // rank by rank: the global batch's row order
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
