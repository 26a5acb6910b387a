// CPU-time clocks: a figure per CPU second holds on a machine shared with other work, where
// wall-clock figures do not.
#pragma once

#include <ctime>

namespace kael {

// Seconds of CPU the calling thread has used.
inline double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Seconds of CPU the whole process (all its threads) has used.
inline double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

}  // namespace kael
