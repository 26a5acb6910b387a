// One completion request in flight: the hand-off between the connection that answers it and
// the scheduler thread that runs it. The scheduler pushes token events and finally a result,
// and wakes the connection each time; the connection takes them (or a thread waits for them)
// and may cancel (its client went away). Everything the two sides share is behind one mutex,
// except the cancel flag, which the scheduler polls.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kael/generate/sampling.hpp"
#include "kael/generate/sequence.hpp"
#include "serve/finish_reason.hpp"
#include "serve/request.hpp"

namespace kael::serve {

using Clock = std::chrono::steady_clock;

// One generated token and the text that became safe to show with it (often "", e.g. while a
// UTF-8 character or a possible stop string is incomplete).
struct TokenEvent {
  std::int32_t id = -1;
  float logprob = 0.0f;
  std::vector<generate::TokenLogprob> top;
  std::string text;
};

// How the request ended. `error_status` != 0 means it failed (timeout, shutdown, model error).
struct JobOutcome {
  FinishReason finish_reason = FinishReason::error;  // stop or length on success
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int error_status = 0;
  std::string error_type{};
  std::string error_message{};
};

class Job {
 public:
  Job(CompletionRequest request, generate::Sequence sequence, Clock::time_point deadline)
      : request_(std::move(request)), sequence_(std::move(sequence)), deadline_(deadline) {}

  const CompletionRequest& request() const { return request_; }
  // Owned by the scheduler thread once submitted; nobody else touches it.
  generate::Sequence& sequence() { return sequence_; }
  Clock::time_point created() const { return created_; }
  Clock::time_point deadline() const { return deadline_; }

  // --- scheduler side ---
  void push(TokenEvent event) {
    std::function<void()> notify;
    {
      std::lock_guard lock(mutex_);
      events_.push_back(std::move(event));
      notify = notify_;
    }
    ready_.notify_all();
    if (notify) notify();
  }
  void finish(JobOutcome outcome) {
    std::function<void()> notify;
    {
      std::lock_guard lock(mutex_);
      outcome_ = std::move(outcome);
      notify = notify_;
    }
    ready_.notify_all();
    if (notify) notify();
  }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

  // --- HTTP side ---
  // `notify` runs on the scheduler's thread after each event and at the end; it must be quick
  // and must not call back into this job.
  void on_change(std::function<void()> notify) {
    std::lock_guard lock(mutex_);
    notify_ = std::move(notify);
  }
  // Moves the events so far into `out` (appending) and returns the outcome once every event
  // before it has been taken; never blocks.
  std::optional<JobOutcome> take(std::vector<TokenEvent>& out) {
    std::lock_guard lock(mutex_);
    return take_locked(out);
  }
  // As take(), after waiting up to `timeout` for something to take.
  std::optional<JobOutcome> wait(std::vector<TokenEvent>& out, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    ready_.wait_for(lock, timeout, [&] { return !events_.empty() || outcome_.has_value(); });
    return take_locked(out);
  }
  // The client is gone: the scheduler drops the request at its next step.
  void cancel() { cancelled_.store(true, std::memory_order_relaxed); }

 private:
  const CompletionRequest request_;
  generate::Sequence sequence_;
  const Clock::time_point created_ = Clock::now();
  const Clock::time_point deadline_;
  std::atomic<bool> cancelled_{false};

  std::optional<JobOutcome> take_locked(std::vector<TokenEvent>& out) {
    for (auto& e : events_) out.push_back(std::move(e));
    events_.clear();
    return outcome_;
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::function<void()> notify_;
  std::vector<TokenEvent> events_;
  std::optional<JobOutcome> outcome_;
};

}  // namespace kael::serve
