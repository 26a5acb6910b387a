// The stopwatch behind the engine's forward profile (model/profile.hpp): laps add the time since
// the previous lap to a member of a profile struct, and cost nothing when no profile is attached
// (the clock is not even read).
#pragma once

#include <chrono>

#include "kael/core/cpu_clock.hpp"

namespace kael {

// Milliseconds on the wall clock (steady) and on the process's CPU clock (all threads).
inline double steady_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
inline double process_cpu_ms() { return 1e3 * process_cpu_seconds(); }

template <class Profile, double (*NowMs)()>
class LapTimer {
 public:
  explicit LapTimer(Profile* profile) : profile_(profile) {
    if (profile_) start_ = last_ = NowMs();
  }
  LapTimer(const LapTimer&) = delete;
  LapTimer& operator=(const LapTimer&) = delete;

  Profile* profile() const { return profile_; }
  // Adds the time since the previous lap to `part` (a member of Profile).
  void lap(double Profile::*part) {
    if (!profile_) return;
    const double now = NowMs();
    profile_->*part += now - last_;
    last_ = now;
  }
  // Starts the next lap here, adding the time since the previous one nowhere.
  void skip() {
    if (profile_) last_ = NowMs();
  }
  // The time since construction (0 without a profile).
  double elapsed_ms() const { return profile_ ? NowMs() - start_ : 0.0; }

 private:
  Profile* profile_;
  double start_ = 0, last_ = 0;
};

}  // namespace kael
