// Internal to src/train: sums gradients over the ranks while the backward pass goes on, as
// PyTorch's DistributedDataParallel does. The backward hands over each group of gradients as it
// completes them (TrainableGPT2::set_gradients_ready); a thread of the reducer's own starts each
// sum in turn and drives MPI's progress, sleeping between polls so that it takes little of the
// cores the backward runs on. wte's gradient, a third of GPT-2 small's, goes first rather than
// last: the micro-batch keeps its embedding rows apart (set_keep_embedding_rows), and finish()
// adds every rank's after the sum. With one rank nothing is started and both calls do nothing.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <span>
#include <thread>

#include "kael/train/gpt2_train.hpp"

namespace kael::train::dist {

class GradientReducer {
 public:
  GradientReducer();  // starts the thread when the world has several ranks
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;
  ~GradientReducer();

  // Before the step's last micro-batch: its backward hands each group of gradients over.
  void attach(TrainableGPT2& model);
  // After it: waits for every sum, then adds every rank's embedding rows (inputs: this rank's
  // (B, T) ids of that micro-batch), rank by rank, so each rank holds the global batch's gradient.
  // Rethrows the first error of a sum.
  void finish(TrainableGPT2& model, std::span<const std::int32_t> inputs);

 private:
  // Queues a sum of `gradients` over the ranks, in place; every rank submits the same groups in
  // the same order, and the buffer is not touched until wait() returns.
  void submit(std::span<float> gradients);
  void wait();
  void loop();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::span<float>> queue_;
  int in_flight_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace kael::train::dist
