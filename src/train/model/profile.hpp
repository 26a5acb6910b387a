// Timing of a training step's parts (TrainProfile) on the process's CPU clock: the core
// stopwatch (core/lap_timer.hpp), which adds the whole step to total_ms when it goes out of scope.
#pragma once

#include "core/lap_timer.hpp"
#include "kael/train/gpt2_train.hpp"

namespace kael::train {

class ProfileTimer : public LapTimer<TrainProfile, process_cpu_ms> {
 public:
  using LapTimer::LapTimer;
  ~ProfileTimer() {
    if (profile()) profile()->total_ms += elapsed_ms();
  }
};

}  // namespace kael::train
