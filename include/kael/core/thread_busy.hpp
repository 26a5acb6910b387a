// Where the compute threads spend their CPU time, counted by the thread pool when asked
// (kael bench --thread-busy). CPU time, not wall time: on a host shared with other work it
// still says how the work was split, and the imbalance between the threads is what shows the
// waits. Off by default, and then nothing is counted.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace kael {

struct ThreadBusy {
  std::int64_t calls = 0;         // parallel_for calls split over more than one thread
  std::int64_t serial_calls = 0;  // calls run whole on their caller (too small, or the pool busy)
  double serial_cpu_ms = 0;       // CPU time of those
  std::int64_t parts = 0;         // ranges of the split calls, summed
  std::vector<double> task_cpu_ms;  // CPU time inside split calls, per thread (0 = the caller)
  double busiest_cpu_ms = 0;      // over the split calls: the sum of each call's busiest thread
  double mean_cpu_ms = 0;         // over the split calls: the sum of each call's mean per thread
  double caller_wait_cpu_ms = 0;  // the caller's CPU after its share, waiting for the others
  double worker_idle_cpu_ms = 0;  // the workers' CPU between their shares (polling, waking)
  // Wall time, so load on the host adds to it, but it is where the time goes that CPU time
  // does not show: a sleeping thread uses none.
  double caller_wait_ms = 0;   // the caller, from the end of its share to the end of the call
  double worker_start_ms = 0;  // the workers, from the call's start to the start of their shares
  double serial_ms = 0;        // the serial calls on their callers' wall clock
  double serial_idle_ms = 0;   // serial_ms times the pool's other threads, which wait meanwhile

  // The synchronisation cost: the threads' wall time spent starting shares (worker_start_ms),
  // waiting at joins (caller_wait_ms) and idle beside serial calls (serial_idle_ms), summed
  // over the threads. As a fraction of a pass: sync_ms() / (threads x the pass's wall time).
  double sync_ms() const { return worker_start_ms + caller_wait_ms + serial_idle_ms; }

  // busiest / mean: 1 when every call's threads had the same work; 2 threads with one idle: 2.
  double imbalance() const { return mean_cpu_ms > 0 ? busiest_cpu_ms / mean_cpu_ms : 1.0; }

  ThreadBusy& operator+=(const ThreadBusy& o) { return add(o, 1.0); }
  ThreadBusy& operator-=(const ThreadBusy& o) { return add(o, -1.0); }

 private:
  ThreadBusy& add(const ThreadBusy& o, double sign) {
    const auto n = static_cast<std::int64_t>(sign);
    calls += n * o.calls;
    serial_calls += n * o.serial_calls;
    serial_cpu_ms += sign * o.serial_cpu_ms;
    parts += n * o.parts;
    task_cpu_ms.resize(std::max(task_cpu_ms.size(), o.task_cpu_ms.size()));
    for (std::size_t i = 0; i < o.task_cpu_ms.size(); ++i) task_cpu_ms[i] += sign * o.task_cpu_ms[i];
    busiest_cpu_ms += sign * o.busiest_cpu_ms;
    mean_cpu_ms += sign * o.mean_cpu_ms;
    caller_wait_cpu_ms += sign * o.caller_wait_cpu_ms;
    worker_idle_cpu_ms += sign * o.worker_idle_cpu_ms;
    caller_wait_ms += sign * o.caller_wait_ms;
    worker_start_ms += sign * o.worker_start_ms;
    serial_ms += sign * o.serial_ms;
    serial_idle_ms += sign * o.serial_idle_ms;
    return *this;
  }
};

}  // namespace kael
