// Timing of the forward pass's parts (ForwardProfile) on the wall clock: the core stopwatch
// (core/lap_timer.hpp), plus the thread pool's busy counts for each part when they are being
// counted (read only then).
#pragma once

#include "core/lap_timer.hpp"
#include "kael/model/gpt2.hpp"
#include "kernels/infra/thread_pool.hpp"

namespace kael::model {

class PartTimer {
 public:
  explicit PartTimer(ForwardProfile* profile) : laps_(profile), counting_(profile && kernels::counting_thread_busy()) {
    if (counting_) busy_ = kernels::thread_busy();
  }
  // Adds the time since the previous lap to `part` (a member of ForwardProfile).
  void lap(double ForwardProfile::*part) {
    laps_.lap(part);
    if (counting_) add_busy(laps_.profile()->*threads_of(part));
  }
  // Starts the next lap here, leaving the time since the previous one to "other".
  void skip() {
    laps_.skip();
    if (counting_) add_busy(laps_.profile()->other_threads);
  }
  // Adds the whole time since construction to total_ms.
  void finish() {
    if (laps_.profile()) laps_.profile()->total_ms += laps_.elapsed_ms();
  }

 private:
  // The ThreadBusy member that goes with a part's time.
  static ThreadBusy ForwardProfile::*threads_of(double ForwardProfile::*part) {
    if (part == &ForwardProfile::attention_ms) return &ForwardProfile::attention_threads;
    if (part == &ForwardProfile::mlp_ms) return &ForwardProfile::mlp_threads;
    if (part == &ForwardProfile::layer_norm_ms) return &ForwardProfile::layer_norm_threads;
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

  LapTimer<ForwardProfile, steady_ms> laps_;
  bool counting_;
  ThreadBusy busy_;
};

}  // namespace kael::model
