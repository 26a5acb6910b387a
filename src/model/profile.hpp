// Timing of the forward pass's parts (ForwardProfile), free when no profile is attached:
// each lap reads the clock only if there is somewhere to add the time.
#pragma once

#include <chrono>

#include "kael/model/gpt2.hpp"

namespace kael::model {

class PartTimer {
 public:
  explicit PartTimer(ForwardProfile* profile) : profile_(profile) {
    if (profile_) start_ = last_ = Clock::now();
  }
  // Adds the time since the previous lap to `part` (a member of ForwardProfile).
  void lap(double ForwardProfile::*part) {
    if (!profile_) return;
    const auto now = Clock::now();
    profile_->*part += std::chrono::duration<double, std::milli>(now - last_).count();
    last_ = now;
  }
  // Starts the next lap here, leaving the time since the previous one to "other".
  void skip() {
    if (profile_) last_ = Clock::now();
  }
  // Adds the whole time since construction to total_ms.
  void finish() {
    if (profile_) profile_->total_ms += std::chrono::duration<double, std::milli>(Clock::now() - start_).count();
  }

 private:
  using Clock = std::chrono::steady_clock;
  ForwardProfile* profile_;
  Clock::time_point start_, last_;
};

}  // namespace kael::model
