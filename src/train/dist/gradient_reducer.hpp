// Internal to src/train: sums gradients over the ranks while the backward pass goes on, as
// PyTorch's DistributedDataParallel does. The parameters are cut into buckets of about
// kBucketFloats, in the reverse of checkpoint order (the order the backward completes them); a
// post-accumulate gradient hook on each parameter (autograd::register_post_accumulate_grad_hook)
// counts its gradient's contributions, and once every parameter of a bucket is complete the
// bucket's gradients are copied into its buffer and the sum is queued. A thread of the reducer's
// own starts each sum in turn and drives MPI's progress, sleeping between polls so that it takes
// little of the cores the backward runs on; finish() waits and copies the sums back. The tied
// wte, used by the embedding and the head, is complete only when the embedding's backward, the
// last, has run. With one rank nothing is registered or started and both calls do nothing.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "kael/core/tensor.hpp"

namespace kael::train {
class GptNet;
}

namespace kael::train::dist {

class GradientReducer {
 public:
  // DistributedDataParallel's bucket size, 25 MiB of F32 gradients.
  static constexpr std::int64_t kBucketFloats = std::int64_t{25} << 18;

  // Registers the hooks on model's parameters and starts the thread when the world has several
  // ranks. The model must outlive the reducer's use; the hooks do nothing once it is gone.
  explicit GradientReducer(GptNet& model);
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;
  ~GradientReducer();

  // Before the step's last micro-batch: its backward queues each bucket as it completes.
  void arm();
  // After it: queues any bucket not yet queued, waits for every sum and copies the sums back
  // into the gradients, so each rank holds the global batch's gradient. Rethrows the first error
  // of a sum.
  void finish();

  struct Buckets;  // the buckets and what the hooks have counted (reducer.cpp)

 private:
  // Queues a sum of `gradients` over the ranks, in place; every rank submits the same buckets in
  // the same order, and the buffer is not touched until wait() returns.
  void submit(std::span<float> gradients);
  void submit_ready();
  void wait();
  void loop();

  std::shared_ptr<Buckets> buckets_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::span<float>> queue_;
  int in_flight_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace kael::train::dist
