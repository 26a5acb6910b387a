// Timing of a training step's parts (TrainProfile) on the process's CPU clock, free when no
// profile is attached: each lap reads the clock only if there is somewhere to add the time.
#pragma once

#include "kael/core/cpu_clock.hpp"
#include "kael/train/gpt2_train.hpp"

namespace kael::train {

class ProfileTimer {
 public:
  explicit ProfileTimer(TrainProfile* profile) : profile_(profile) {
    if (profile_) start_ = last_ = now_ms();
  }
  ProfileTimer(const ProfileTimer&) = delete;
  ProfileTimer& operator=(const ProfileTimer&) = delete;
  // Adds the time since the previous lap to `part` (a member of TrainProfile).
  void lap(double TrainProfile::*part) {
    if (!profile_) return;
    const double now = now_ms();
    profile_->*part += now - last_;
    last_ = now;
  }
  ~ProfileTimer() {
    if (profile_) profile_->total_ms += now_ms() - start_;
  }

 private:
  static double now_ms() { return 1e3 * process_cpu_seconds(); }
  TrainProfile* profile_;
  double start_ = 0, last_ = 0;
};

}  // namespace kael::train
