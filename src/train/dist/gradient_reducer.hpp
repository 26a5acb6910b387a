// Internal to src/train: sums gradients over the ranks while the backward pass goes on, as
// PyTorch's DistributedDataParallel does. The parameters are cut into buckets of about
// kBucketFloats in the order the backward completes them (the reverse of checkpoint order); a
// post-accumulate gradient hook on each parameter (autograd::register_post_accumulate_grad_hook)
// marks it complete, and once every parameter of a bucket is, the bucket's gradients are copied
// into its buffer and its sum is queued. A thread of the reducer's own starts each sum in turn and
// drives MPI's progress, sleeping between polls so that it takes little of the cores the backward
// runs on; finish() waits and copies the sums back.
// A tied wte (a third of GPT-2 small) is used by the head, whose backward comes first, and by the
// embedding, whose backward is the last of all: its bucket, wte alone, goes first, as soon as the
// head's part is in, and the embedding's part of the last micro-batch is kept apart, one row per
// input token (a pre-accumulate hook reads them from the embedding's gradient); finish() adds
// every rank's rows after the sum, rank by rank. With one rank nothing is registered or started
// and both calls do nothing.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <thread>

namespace kael::train {
class GptNet;
}

namespace kael::train::dist {

class GradientReducer {
 public:
  // DistributedDataParallel's bucket size, 25 MiB of F32 gradients.
  static constexpr std::int64_t kBucketFloats = std::int64_t{25} << 18;

  // Registers the hooks on model's parameters and starts the thread when the world has several
  // ranks. The hooks do nothing once the reducer is gone.
  explicit GradientReducer(GptNet& model);
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;
  ~GradientReducer();

  // Before the step's last micro-batch, with its (B, T) input ids on this rank: its backward
  // queues each bucket as it completes.
  void arm(std::span<const std::int32_t> inputs);
  // After it: queues any bucket not yet queued, waits for every sum, copies the sums back into the
  // gradients and adds every rank's embedding rows, so each rank holds the global batch's
  // gradient. Rethrows the first error of a sum.
  void finish();

  struct Buckets;  // the buckets and what the hooks have counted (gradient_reducer.cpp)

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
