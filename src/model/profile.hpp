// Timing of the forward pass's parts (ForwardProfile), free when no profile is attached:
// each lap reads the clock only if there is somewhere to add the time, and the thread pool's
// counts only if they are being counted.
#pragma once

#include <chrono>

#include "kael/model/gpt2.hpp"
#include "kernels/thread_pool.hpp"

namespace kael::model {

class PartTimer {
 public:
  explicit PartTimer(ForwardProfile* profile)
      : profile_(profile), counting_(profile && kernels::counting_thread_busy()) {
    if (profile_) start_ = last_ = Clock::now();
    if (counting_) busy_ = kernels::thread_busy();
  }
  // Adds the time since the previous lap to `part` (a member of ForwardProfile).
  void lap(double ForwardProfile::*part) {
    if (!profile_) return;
    const auto now = Clock::now();
    profile_->*part += std::chrono::duration<double, std::milli>(now - last_).count();
    last_ = now;
    if (counting_) add_busy(profile_->*threads_of(part));
  }
  // Starts the next lap here, leaving the time since the previous one to "other".
  void skip() {
    if (profile_) last_ = Clock::now();
    if (counting_) add_busy(profile_->other_threads);
  }
  // Adds the whole time since construction to total_ms.
  void finish() {
    if (profile_) profile_->total_ms += std::chrono::duration<double, std::milli>(Clock::now() - start_).count();
  }

 private:
  using Clock = std::chrono::steady_clock;

  // The ThreadBusy member that goes with a part's time.
  static ThreadBusy ForwardProfile::*threads_of(double ForwardProfile::*part) {
    if (part == &ForwardProfile::attention_ms) return &ForwardProfile::attention_threads;
    if (part == &ForwardProfile::mlp_ms) return &ForwardProfile::mlp_threads;
    if (part == &ForwardProfile::layernorm_ms) return &ForwardProfile::layernorm_threads;
    if (part == &ForwardProfile::logits_ms) return &ForwardProfile::logits_threads;
    return &ForwardProfile::other_threads;
  }
  // Adds the pool's counts since the previous lap to `threads`.
  void add_busy(ThreadBusy& threads) {
    ThreadBusy now = kernels::thread_busy();
    ThreadBusy since = now;
    since -= busy_;
    threads += since;
    busy_ = std::move(now);
  }

  ForwardProfile* profile_;
  bool counting_;
  Clock::time_point start_, last_;
  ThreadBusy busy_;
};

}  // namespace kael::model
