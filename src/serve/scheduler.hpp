// Continuous batching. One thread owns the model and every running sequence; HTTP threads
// only submit jobs and read their events. Each iteration of the loop:
//   1. admits queued jobs, in order, while the batch has free slots (a slot = a sequence + its
//      KV cache) and the KV pool has the blocks of the job's prompt + max_tokens positions,
//      which the job takes at once (so a running sequence never finds the pool empty; the
//      job at the head of the queue waits until enough blocks are given back),
//      A job whose prompt starts with whole blocks of a recent prompt (the prefix cache)
//      attaches them and prefills only the rest; its prompt's full blocks are cached in turn.
//   2. drops jobs whose client went away or whose deadline passed,
//   3. prefills newly admitted prompts, shortest first, at most `prefill_chunk` prompt tokens per iteration
//      (a long prompt takes several iterations, so running sequences keep decoding meanwhile,
//      and a cancelled prompt stops between chunks),
//   4. runs one decode step for every sequence past its prefill, all in one GPT2::forward_batch
//      (each weight read once for the whole batch, bit for bit equal to one forward per sequence),
// so requests join and leave at token boundaries and a long request never holds up a short one.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "kael/model/gpt2.hpp"
#include "serve/job.hpp"
#include "serve/metrics.hpp"

namespace kael::serve {

struct SchedulerOptions {
  int max_batch = 16;      // sequences decoding together
  int max_queue = 64;      // jobs waiting for a slot or KV memory; more are refused (503)
  int prefill_chunk = 128;  // prompt tokens prefilled per loop iteration, all sequences together
  std::int64_t kv_blocks = 0;  // the KV pool's blocks (--kv-memory-mb); 0: max_batch full contexts
  // Blocks of recent prompts kept (--prefix-cache-mb), at most the pool's; 0: no caching;
  // kDefaultPrefixCache: half of the pool (cached blocks nobody holds are free to take, so the
  // cache never keeps a request waiting: vLLM caches prefixes by default for the same reason).
  static constexpr std::int64_t kDefaultPrefixCache = -1;
  std::int64_t prefix_cache_blocks = 0;
};

class Scheduler {
 public:
  Scheduler(const model::GPT2& model, const SchedulerOptions& options, Metrics& metrics);
  ~Scheduler();  // stop()s
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // never_fits: the job's prompt + max_tokens positions need more KV blocks than the pool has,
  // so it could never start. queue_full: taking it would leave more than max_queue jobs
  // waiting (a job the next iteration starts at once, with a free slot and free blocks, does
  // not wait).
  enum class Admission { accepted, queue_full, never_fits, shutting_down };
  Admission submit(std::shared_ptr<Job> job);
  // The KV blocks a job takes at admission (its prompt + max_tokens positions, within the context).
  std::int64_t blocks_needed(const Job& job) const;
  // Ends every queued and running job with a 503 and joins the thread. Idempotent.
  void stop();

  int queue_depth() const;
  int active_count() const { return active_count_.load(std::memory_order_relaxed); }
  const SchedulerOptions& options() const { return options_; }
  const std::shared_ptr<model::KvPool>& kv_pool() const { return pool_; }
  // The prefix cache's cap in blocks: the requested one, at most the pool's blocks.
  std::int64_t prefix_cache_blocks() const { return prefix_cache_blocks_; }

 private:
  struct Slot {
    std::shared_ptr<Job> job;
    model::Session session;
    std::size_t prefilled = 0;  // prompt tokens already in the KV cache
    bool first_token = true;
  };

  void run();
  void admit();
  void sweep_queue();
  void drop_cancelled_and_expired();
  void prefill();
  void decode();
  std::size_t waiting_locked() const;  // under mutex_
  void time_out(Job& job, std::string message);
  void accept(Slot& slot, std::span<const float> logits);
  void end(Slot& slot, JobOutcome outcome);
  void fail(Slot& slot, int status, std::string type, std::string message);
  void release_finished();
  model::Session take_session();

  const model::GPT2& model_;
  const SchedulerOptions options_;
  std::int64_t prefix_cache_blocks_ = 0;
  Metrics& metrics_;
  std::shared_ptr<model::KvPool> pool_;  // every slot's KV blocks

  // Guards queue_ and stopping_, and makes admission's changes to the pool, the queue and the
  // running count one step for submit().
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stopping_ = false;

  // Scheduler thread only.
  std::vector<Slot> active_;
  std::vector<model::Session> spare_sessions_;  // KV caches kept for reuse (allocating one is not free)
  std::atomic<int> active_count_{0};

  std::thread thread_;
};

}  // namespace kael::serve
