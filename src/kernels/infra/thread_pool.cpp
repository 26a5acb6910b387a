// A fixed pool of workers woken per job with a generation counter. Jobs are split into one
// contiguous range per thread; the caller runs range 0 itself, so a 1-thread pool has no
// workers and no synchronisation at all.
//
// A polling worker picks up a job without taking the mutex: the generation word carries the
// job's part count, so a worker that takes no part never reads the job, and one that does reads
// it while the caller waits for it. A job thus costs a polling worker one load however many
// workers poll, where each took the mutex in turn at every job before.
//
// Waiting threads poll for kSpin before they sleep: a decode step is ~50 jobs of 50-200 us
// separated by a few microseconds of serial work, and waking a sleeping worker through the
// condition variable costs tens of microseconds each time. The price: where other processes
// take every core, a polling thread can hold the core its partner needs, and an idle pool burns
// kSpin per job. Decode speed both ways: docs/performance.md, "The measurements behind the
// code's constants".
#include "kernels/infra/thread_pool.hpp"

#include "kael/core/cpu_clock.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/dispatch/cpu_features.hpp"

namespace kael::kernels {
namespace {

// Tells the core that this thread is polling (it yields to a hyperthread sibling, saves power).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();  // SSE2: baseline x86-64
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

// How long a waiting thread polls before it sleeps on the condition variable.
constexpr auto kSpin = std::chrono::microseconds(50);

// Polls `ready` for up to kSpin; true as soon as it holds.
template <class Ready>
bool spin_until(Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (ready()) return true;
    cpu_relax();
    if (i % 64 == 63 && std::chrono::steady_clock::now() > deadline) return false;
  }
}

std::atomic<bool> counting{false};
thread_local bool in_counted_task = false;  // a serial call inside a counted share is in it already

double thread_cpu_ms() { return 1e3 * thread_cpu_seconds(); }

// The totals of thread_busy(), added to by whichever thread finishes a counted call.
std::mutex busy_mutex;
ThreadBusy busy_totals;

double wall_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void add_serial_call(double cpu_ms, double ms, int threads) {
  std::lock_guard lock(busy_mutex);
  ++busy_totals.serial_calls;
  busy_totals.serial_cpu_ms += cpu_ms;
  busy_totals.serial_ms += ms;
  busy_totals.serial_idle_ms += ms * (threads - 1);
}

// One split call: each part's CPU time in its share and, for the workers, since their last
// share, and the wall time from the call's start to their share's start.
void add_split_call(const std::vector<double>& share_ms, const std::vector<double>& idle_ms,
                    const std::vector<double>& start_ms, int parts, double caller_wait_cpu_ms, double caller_wait_ms) {
  std::lock_guard lock(busy_mutex);
  ThreadBusy& b = busy_totals;
  ++b.calls;
  b.parts += parts;
  if (b.task_cpu_ms.size() < share_ms.size()) b.task_cpu_ms.resize(share_ms.size());
  double sum = 0, busiest = 0;
  for (int i = 0; i < parts; ++i) {
    b.task_cpu_ms[static_cast<std::size_t>(i)] += share_ms[static_cast<std::size_t>(i)];
    sum += share_ms[static_cast<std::size_t>(i)];
    busiest = std::max(busiest, share_ms[static_cast<std::size_t>(i)]);
    if (i == 0) continue;
    b.worker_idle_cpu_ms += idle_ms[static_cast<std::size_t>(i)];
    b.worker_start_ms += start_ms[static_cast<std::size_t>(i)];
  }
  b.busiest_cpu_ms += busiest;
  b.mean_cpu_ms += sum / parts;
  b.caller_wait_cpu_ms += caller_wait_cpu_ms;
  b.caller_wait_ms += caller_wait_ms;
}

class Pool {
 public:
  explicit Pool(int threads)
      : threads_(std::max(1, threads)),
        share_ms_(static_cast<std::size_t>(threads_)),
        idle_ms_(static_cast<std::size_t>(threads_)),
        start_ms_(static_cast<std::size_t>(threads_)) {
    for (int i = 1; i < threads_; ++i) workers_.emplace_back([this, i] { work(i); });
  }
  ~Pool() {
    {
      std::lock_guard lock(mutex_);
      stopping_.store(true, std::memory_order_relaxed);
      publish(0);
    }
    wake_.notify_all();
    for (auto& worker : workers_) worker.join();
  }
  int threads() const { return threads_; }

  // Runs one job over `parts` ranges (parts <= threads_). Returns false without running
  // anything when another job holds the pool.
  bool try_run(std::int64_t n, int parts, detail::RangeFn fn, void* context) {
    bool idle = false;
    if (!busy_.compare_exchange_strong(idle, true, std::memory_order_acquire)) return false;
    {
      std::lock_guard lock(mutex_);
      const bool count = counting.load(std::memory_order_relaxed);
      job_ = {n, parts, fn, context, count, count ? wall_ms() : 0.0};
      pending_.store(parts - 1, std::memory_order_relaxed);
      publish(parts);
    }
    wake_.notify_all();
    const bool counted = job_.counted;
    double share_end = 0, share_end_wall = 0;
    if (counted) {
      const double start = thread_cpu_ms();
      run_part(0);
      share_end = thread_cpu_ms();
      share_end_wall = wall_ms();
      share_ms_[0] = share_end - start;
    } else {
      run_part(0);
    }
    if (!spin_until([this] { return pending_.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock lock(mutex_);
      done_.wait(lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
    }
    if (counted)
      add_split_call(share_ms_, idle_ms_, start_ms_, parts, thread_cpu_ms() - share_end, wall_ms() - share_end_wall);
    busy_.store(false, std::memory_order_release);
    return true;
  }

 private:
  struct Job {
    std::int64_t n = 0;
    int parts = 0;
    detail::RangeFn fn = nullptr;
    void* context = nullptr;
    bool counted = false;  // counting_thread_busy() when it started
    double start_wall_ms = 0;  // when it started, if counted
  };

  void run_part(int part) const {
    const std::int64_t begin = job_.n * part / job_.parts;
    const std::int64_t end = job_.n * (part + 1) / job_.parts;
    in_counted_task = job_.counted;
    if (begin < end) job_.fn(job_.context, begin, end);
    in_counted_task = false;
  }

  // The generation word: a job's sequence number in the high half, its part count in the low.
  static constexpr std::uint64_t kPartsMask = 0xffffffffu;
  static int parts_of(std::uint64_t generation) { return static_cast<int>(generation & kPartsMask); }

  // Makes the job (or the stop) written before it visible to the workers. Under mutex_, so that
  // a worker about to sleep on wake_ sees it or is woken by the notify that follows.
  void publish(int parts) {
    const std::uint64_t next = (generation_.load(std::memory_order_relaxed) >> 32) + 1;
    generation_.store(next << 32 | static_cast<std::uint64_t>(parts), std::memory_order_release);
  }

  void work(int index) {
    std::uint64_t seen = 0;
    double idle_since = -1;  // this thread's CPU clock when its last counted share ended
    for (;;) {
      const auto fresh = [&] { return generation_.load(std::memory_order_acquire) != seen; };
      if (!spin_until(fresh)) {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, fresh);
      }
      // No job is skipped: the caller publishes the next one only after every part of this one
      // has finished, this worker's included when it has a part.
      seen = generation_.load(std::memory_order_acquire);
      if (stopping_.load(std::memory_order_relaxed)) return;
      if (index >= parts_of(seen)) continue;  // this job needs fewer threads: job_ is not ours to read
      if (job_.counted) {
        const double start = thread_cpu_ms();
        const auto i = static_cast<std::size_t>(index);
        idle_ms_[i] = idle_since >= 0 ? start - idle_since : 0;
        start_ms_[i] = wall_ms() - job_.start_wall_ms;
        run_part(index);
        idle_since = thread_cpu_ms();
        share_ms_[i] = idle_since - start;
      } else {
        idle_since = -1;
        run_part(index);
      }
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard lock(mutex_);  // the caller checks pending_ under it before sleeping
        done_.notify_one();
      }
    }
  }

  const int threads_;
  std::vector<std::thread> workers_;
  // Set while a job runs. A flag, not a mutex: a nested call from the same thread must see
  // "busy" rather than lock a mutex it already holds.
  std::atomic<bool> busy_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  Job job_;
  // Per part of a counted job, each written by its own thread before it counts down pending_.
  std::vector<double> share_ms_, idle_ms_, start_ms_;
  std::atomic<int> pending_{0};
  std::atomic<std::uint64_t> generation_{0};  // see publish()
  std::atomic<bool> stopping_{false};
};

// One thread per physical core: the kernels are bound by the FMA units and the memory bus,
// which hyperthread siblings share, so a second thread per core only adds synchronisation.
int default_threads() { return physical_cores(); }

std::unique_ptr<Pool>& pool() {
  static std::unique_ptr<Pool> instance = std::make_unique<Pool>(default_threads());
  return instance;
}

}  // namespace

void count_thread_busy(bool on) { counting.store(on, std::memory_order_relaxed); }
bool counting_thread_busy() { return counting.load(std::memory_order_relaxed); }
ThreadBusy thread_busy() {
  std::lock_guard lock(busy_mutex);
  return busy_totals;
}

int max_threads() {
  const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return kMaxThreadsPerCpu * cpus;
}

void set_num_threads(int n) {
  const int threads = n <= 0 ? default_threads() : std::min(n, max_threads());
  if (pool()->threads() != threads) pool() = std::make_unique<Pool>(threads);
}

int num_threads() { return pool()->threads(); }

namespace detail {
void parallel_for(std::int64_t n, std::int64_t min_per_thread, RangeFn fn, void* context) {
  if (n <= 0) return;
  Pool& p = *pool();
  const std::int64_t by_size = n / std::max<std::int64_t>(1, min_per_thread);
  const int parts = static_cast<int>(std::clamp<std::int64_t>(by_size, 1, p.threads()));
  if (parts > 1 && p.try_run(n, parts, fn, context)) return;
  if (!counting.load(std::memory_order_relaxed) || in_counted_task) {
    fn(context, 0, n);
    return;
  }
  const double start = thread_cpu_ms(), start_wall = wall_ms();
  fn(context, 0, n);
  add_serial_call(thread_cpu_ms() - start, wall_ms() - start_wall, p.threads());
}
}  // namespace detail

}  // namespace kael::kernels
