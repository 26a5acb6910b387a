// A fixed pool of workers. Each parallel_for call is one job of `parts` contiguous ranges
// (parts <= threads, fixed by the call's size and the thread count alone, so results do not
// depend on who runs which range). The job's parts are handed out from one atomic word, to
// the caller first and then to whichever worker asks: no range belongs to a thread.
//
// Who waits where (docs/engine.md, "The thread pool"):
// - The caller publishes a job with one store, takes parts until none is left, then waits
//   only for the parts a worker is still running. It never waits for a worker to start: a
//   worker that is asleep, descheduled by the OS or busy elsewhere takes no part, and the
//   caller runs that part itself. So more threads than free cores cost a late worker's
//   polling, never a join on a thread that is not running.
// - A worker polls the job word between jobs for kSpin (a decode step's jobs come a few
//   microseconds apart, and a wake-up through the condition variable costs tens of them),
//   then sleeps. The caller takes the mutex to wake sleepers only when one has said it sleeps.
//
// A 1-thread pool has no workers and no synchronisation at all.
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

// How long a waiting thread polls before it sleeps on a condition variable. It polls with
// `pause` and never yields its core: on a host whose other processes take the cores, a thread
// that called sched_yield while waiting lost its core for a time slice and came back late
// (a 2-thread prefill 1.10-1.17x slower in alternated runs); what keeps a late thread from
// costing the others is that no one waits for it to start (see above). Figures:
// docs/performance.md, "The measurements behind the code's constants".
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
thread_local bool in_part = false;          // inside a part: a parallel_for from here runs serially

double thread_cpu_ms() { return 1e3 * thread_cpu_seconds(); }

double wall_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The totals of thread_busy(), added to by whichever thread finishes a counted call.
std::mutex busy_mutex;
ThreadBusy busy_totals;

void add_serial_call(double cpu_ms, double ms, int threads) {
  std::lock_guard lock(busy_mutex);
  ++busy_totals.serial_calls;
  busy_totals.serial_cpu_ms += cpu_ms;
  busy_totals.serial_ms += ms;
  busy_totals.serial_idle_ms += ms * (threads - 1);
}

// Per thread of one counted job: CPU time in its parts, CPU time since its previous job's
// parts (workers), wall time from the job's start to its first part (workers that took one).
struct ThreadCounts {
  double share_ms = 0, idle_ms = 0, start_ms = 0;
  bool took_part = false;
};

void add_split_call(const std::vector<ThreadCounts>& t, int parts, double caller_wait_cpu_ms, double caller_wait_ms) {
  std::lock_guard lock(busy_mutex);
  ThreadBusy& b = busy_totals;
  ++b.calls;
  b.parts += parts;
  if (b.task_cpu_ms.size() < t.size()) b.task_cpu_ms.resize(t.size());
  double sum = 0, busiest = 0;
  int took = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (!t[i].took_part) continue;
    ++took;
    b.task_cpu_ms[i] += t[i].share_ms;
    sum += t[i].share_ms;
    busiest = std::max(busiest, t[i].share_ms);
    if (i == 0) continue;
    b.worker_idle_cpu_ms += t[i].idle_ms;
    b.worker_start_ms += t[i].start_ms;
  }
  b.busiest_cpu_ms += busiest;
  b.mean_cpu_ms += sum / std::max(1, took);
  b.caller_wait_cpu_ms += caller_wait_cpu_ms;
  b.caller_wait_ms += caller_wait_ms;
}

class Pool {
 public:
  explicit Pool(int threads) : threads_(std::max(1, threads)), counts_(static_cast<std::size_t>(threads_)) {
    for (int i = 1; i < threads_; ++i) workers_.emplace_back([this, i] { work(i); });
  }
  ~Pool() {
    stopping_.store(true, std::memory_order_seq_cst);
    publish(0);
    {
      std::lock_guard lock(mutex_);
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
    const bool count = counting.load(std::memory_order_relaxed);
    if (count) std::fill(counts_.begin(), counts_.end(), ThreadCounts{});
    job_ = {n, parts, fn, context, count, count ? wall_ms() : 0.0};
    done_.store(0, std::memory_order_relaxed);
    const std::uint32_t generation = publish(parts);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      { std::lock_guard lock(mutex_); }  // a worker between its check and its wait gets the notify
      wake_.notify_all();
    }
    const double share_start = count ? thread_cpu_ms() : 0.0;
    bool took = false;
    for (int part; (part = claim(generation)) >= 0;) {
      run_part(part);
      took = true;
      done_.fetch_add(1, std::memory_order_acq_rel);
    }
    double share_end = 0, share_end_wall = 0;
    if (count) {
      share_end = thread_cpu_ms();
      share_end_wall = wall_ms();  // after the CPU clock's system call, which is not waiting
      counts_[0] = {share_end - share_start, 0, 0, took};
    }
    const auto finished = [&] { return done_.load(std::memory_order_seq_cst) == parts; };
    if (!spin_until(finished)) {
      std::unique_lock lock(mutex_);
      caller_sleeps_.store(true, std::memory_order_seq_cst);
      done_cv_.wait(lock, finished);
      caller_sleeps_.store(false, std::memory_order_relaxed);
    }
    if (count) {
      const double wait_ms = wall_ms() - share_end_wall;  // before the CPU clock's system call
      add_split_call(counts_, parts, thread_cpu_ms() - share_end, wait_ms);
    }
    busy_.store(false, std::memory_order_release);
    return true;
  }

 private:
  struct Job {
    std::int64_t n = 0;
    int parts = 0;
    detail::RangeFn fn = nullptr;
    void* context = nullptr;
    bool counted = false;      // counting_thread_busy() when it started
    double start_wall_ms = 0;  // when it started, if counted
  };

  // The job word: the job's sequence number (32 bits), its part count (16) and the next part
  // to hand out (16). A part is taken by moving `next` on with a compare-exchange that also
  // checks the sequence number, so a worker that wakes late cannot take a part of a later
  // job thinking it is of the one it saw.
  static constexpr int kPartBits = 16;
  static constexpr std::uint64_t kPartMask = (std::uint64_t{1} << kPartBits) - 1;
  static std::uint32_t generation_of(std::uint64_t word) { return static_cast<std::uint32_t>(word >> 32); }
  static int parts_of(std::uint64_t word) { return static_cast<int>((word >> kPartBits) & kPartMask); }
  static int next_of(std::uint64_t word) { return static_cast<int>(word & kPartMask); }

  // Makes the job (or the stop) written before it visible to whoever takes one of its parts.
  std::uint32_t publish(int parts) {
    const std::uint32_t generation = generation_of(word_.load(std::memory_order_relaxed)) + 1;
    word_.store(std::uint64_t{generation} << 32 | static_cast<std::uint64_t>(parts) << kPartBits,
                std::memory_order_seq_cst);
    return generation;
  }

  // The next part of job `generation`, or -1 when it has none left (or a later job is out).
  int claim(std::uint32_t generation) {
    std::uint64_t word = word_.load(std::memory_order_acquire);
    for (;;) {
      if (generation_of(word) != generation || next_of(word) >= parts_of(word)) return -1;
      if (word_.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel, std::memory_order_acquire))
        return next_of(word);
    }
  }

  void run_part(int part) const {
    const std::int64_t begin = job_.n * part / job_.parts;
    const std::int64_t end = job_.n * (part + 1) / job_.parts;
    in_counted_task = job_.counted;
    in_part = true;
    if (begin < end) job_.fn(job_.context, begin, end);
    in_part = false;
    in_counted_task = false;
  }

  void work(int index) {
    std::uint32_t seen = 0;
    double idle_since = -1;  // this thread's CPU clock when its last counted share ended
    for (;;) {
      const auto fresh = [&] { return generation_of(word_.load(std::memory_order_seq_cst)) != seen; };
      if (!spin_until(fresh)) {
        std::unique_lock lock(mutex_);
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        wake_.wait(lock, fresh);
        sleepers_.fetch_sub(1, std::memory_order_relaxed);
      }
      seen = generation_of(word_.load(std::memory_order_acquire));
      if (stopping_.load(std::memory_order_acquire)) return;
      // job_ is read only once a part is ours: the caller then waits for it before the next job.
      int part = claim(seen);
      if (part < 0) continue;
      const bool counted = job_.counted;
      const int parts = job_.parts;  // job_ may be the next job's once the last part is done
      const double start_wall = counted ? wall_ms() : 0.0;  // before the CPU clock's system call
      const double start = counted ? thread_cpu_ms() : 0.0;
      for (; part >= 0; part = claim(seen)) {
        run_part(part);
        if (counted) {  // written before this part counts as done, read by the caller after
          ThreadCounts& c = counts_[static_cast<std::size_t>(index)];
          c = {thread_cpu_ms() - start, idle_since >= 0 ? start - idle_since : 0, start_wall - job_.start_wall_ms, true};
        }
        if (done_.fetch_add(1, std::memory_order_seq_cst) + 1 == parts &&
            caller_sleeps_.load(std::memory_order_seq_cst)) {
          std::lock_guard lock(mutex_);  // the caller checks done_ under it before sleeping
          done_cv_.notify_one();
        }
      }
      idle_since = counted ? thread_cpu_ms() : -1;
    }
  }

  const int threads_;
  std::vector<std::thread> workers_;
  // Set while a job runs. A flag, not a mutex: a nested call from the same thread must see
  // "busy" rather than lock a mutex it already holds.
  std::atomic<bool> busy_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_cv_;
  std::atomic<int> sleepers_{0};         // workers asleep on wake_, or about to be
  std::atomic<bool> caller_sleeps_{false};  // the caller asleep on done_cv_, or about to be
  Job job_;
  std::vector<ThreadCounts> counts_;  // per thread of a counted job, each written by its thread
  alignas(64) std::atomic<std::uint64_t> word_{0};  // see publish() and claim()
  alignas(64) std::atomic<int> done_{0};           // parts of the current job finished
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
  return std::min(kMaxThreadsPerCpu * cpus, kMaxThreads);
}

void set_num_threads(int n) {
  const int threads = n <= 0 ? std::min(default_threads(), max_threads()) : std::min(n, max_threads());
  if (pool()->threads() != threads) pool() = std::make_unique<Pool>(threads);
}

int num_threads() { return pool()->threads(); }

namespace detail {
void parallel_for(std::int64_t n, std::int64_t min_per_thread, RangeFn fn, void* context) {
  if (n <= 0) return;
  Pool& p = *pool();
  const std::int64_t by_size = n / std::max<std::int64_t>(1, min_per_thread);
  const int parts = static_cast<int>(std::clamp<std::int64_t>(by_size, 1, p.threads()));
  if (parts > 1 && !in_part && p.try_run(n, parts, fn, context)) return;
  if (!counting.load(std::memory_order_relaxed) || in_counted_task) {
    fn(context, 0, n);
    return;
  }
  // The wall clock (vDSO, tens of ns) inside the CPU clock (a system call, about a microsecond
  // in a VM), so that serial_ms holds the call and not the counting.
  const double start = thread_cpu_ms(), start_wall = wall_ms();
  fn(context, 0, n);
  const double ms = wall_ms() - start_wall;
  add_serial_call(thread_cpu_ms() - start, ms, p.threads());
}
}  // namespace detail

}  // namespace kael::kernels
