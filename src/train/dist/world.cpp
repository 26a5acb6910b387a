// The world of a run: MPI when launched by mpirun and built with it, else one rank.
#include "train/dist/world.hpp"

#include <cstdlib>
#include <mutex>
#include <thread>

#include "kael/core/error.hpp"

#if KAEL_MPI
#include <dlfcn.h>
#include <mpi.h>
#endif

namespace kael::train {

namespace {

// The rank count a launcher gave this process through its environment (1 when none did).
int launched_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    if (const char* value = std::getenv(name)) {
      const int size = std::atoi(value);
      if (size > 0) return size;
    }
  }
  return std::getenv("PMIX_RANK") || std::getenv("PMI_RANK") ? 2 : 1;  // launched, size unknown
}

#if KAEL_MPI
void check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw Error(str("MPI ", what, " failed: ", std::string(text, static_cast<std::size_t>(length))));
}

// Owns MPI's lifetime in this process: initialized on first use, finalized (or, after a failed
// run, aborted so the other ranks do not wait on this one) when the process exits.
class Session {
 public:
  Session() {
    // A Python extension is loaded with RTLD_LOCAL; Open MPI's plugins look up libmpi's symbols
    // globally, so make them global before MPI_Init loads the plugins.
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&MPI_Init_thread), &info) && info.dli_fname)
      dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
    serialized_ = provided >= MPI_THREAD_SERIALIZED;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &info_.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &info_.size);
    MPI_Comm local;
    check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local), "MPI_Comm_split_type");
    MPI_Comm_size(local, &info_.local_size);
    MPI_Comm_free(&local);
    info_.mpi = true;
  }
  ~Session() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    if (failed_) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Finalize();
  }
  const WorldInfo& info() const { return info_; }
  bool serialized() const { return serialized_; }
  void fail() {
    failed_ = !together_;
    together_ = false;
  }
  void fail_together() { together_ = true; }

 private:
  WorldInfo info_;
  bool serialized_ = false;
  bool failed_ = false;
  bool together_ = false;  // the failure being thrown is every rank's
};

Session* session() {
  static std::once_flag once;
  static Session* instance = nullptr;
  std::call_once(once, [] {
    if (launched_size() <= 1) return;
    static Session s;
    instance = &s;
  });
  return instance;
}
#endif

}  // namespace

WorldInfo world() {
#if KAEL_MPI
  if (Session* s = session()) return s->info();
  return {};
#else
  if (const int size = launched_size(); size > 1)
    throw Error(str("this process is one of ", size, " ranks started by an MPI launcher, but this kael was built ",
                    "without MPI; install Open MPI (libopenmpi-dev) and rebuild, or run one process"));
  return {};
#endif
}

namespace dist {

#if KAEL_MPI
namespace {
bool active() { return session() != nullptr && session()->info().size > 1; }
constexpr int kChunk = 1 << 30;  // MPI counts are ints: long buffers go in pieces
}  // namespace

void sum(std::span<float> values) {
  if (!active()) return;
  for (std::size_t i = 0; i < values.size(); i += kChunk) {
    const int n = static_cast<int>(std::min<std::size_t>(kChunk, values.size() - i));
    check(MPI_Allreduce(MPI_IN_PLACE, values.data() + i, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
  }
}

double sum(double value) {
  if (!active()) return value;
  check(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
  return value;
}

bool any(bool value) {
  if (!active()) return value;
  int flag = value ? 1 : 0;
  check(MPI_Allreduce(MPI_IN_PLACE, &flag, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  return flag != 0;
}

void broadcast(std::span<float> values) {
  if (!active()) return;
  for (std::size_t i = 0; i < values.size(); i += kChunk) {
    const int n = static_cast<int>(std::min<std::size_t>(kChunk, values.size() - i));
    check(MPI_Bcast(values.data() + i, n, MPI_FLOAT, 0, MPI_COMM_WORLD), "MPI_Bcast");
  }
}

void broadcast(std::span<std::int64_t> values) {
  if (!active()) return;
  check(MPI_Bcast(values.data(), static_cast<int>(values.size()), MPI_INT64_T, 0, MPI_COMM_WORLD), "MPI_Bcast");
}

template <class T>
std::vector<T> gather_as(std::span<const T> values, MPI_Datatype type) {
  if (!active()) return {values.begin(), values.end()};
  if (values.size() > static_cast<std::size_t>(kChunk)) throw Error("gather: buffer too long");
  std::vector<T> all(values.size() * static_cast<std::size_t>(session()->info().size));
  check(MPI_Allgather(values.data(), static_cast<int>(values.size()), type, all.data(),
                      static_cast<int>(values.size()), type, MPI_COMM_WORLD),
        "MPI_Allgather");
  return all;
}

std::vector<std::uint64_t> gather(std::span<const std::uint64_t> values) { return gather_as(values, MPI_UINT64_T); }
std::vector<std::int32_t> gather(std::span<const std::int32_t> values) { return gather_as(values, MPI_INT32_T); }
std::vector<float> gather(std::span<const float> values) { return gather_as(values, MPI_FLOAT); }

void mark_failed() {
  if (Session* s = session()) s->fail();
}

void fail_together() {
  if (Session* s = session()) s->fail_together();
}

void abort_run() {
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

void sum_polling(std::span<float> values, std::chrono::microseconds poll) {
  if (!active()) return;
  if (!session()->serialized() || values.size() > static_cast<std::size_t>(kChunk)) {
    sum(values);  // this MPI cannot be called from a second thread, or the count needs pieces
    return;
  }
  MPI_Request request;
  check(MPI_Iallreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_FLOAT, MPI_SUM,
                       MPI_COMM_WORLD, &request),
        "MPI_Iallreduce");
  for (int done = 0;;) {
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) return;
    std::this_thread::sleep_for(poll);
  }
}
#else
void sum(std::span<float>) {}
double sum(double value) { return value; }
bool any(bool value) { return value; }
void broadcast(std::span<float>) {}
void broadcast(std::span<std::int64_t>) {}
std::vector<std::uint64_t> gather(std::span<const std::uint64_t> values) { return {values.begin(), values.end()}; }
std::vector<std::int32_t> gather(std::span<const std::int32_t> values) { return {values.begin(), values.end()}; }
std::vector<float> gather(std::span<const float> values) { return {values.begin(), values.end()}; }
void mark_failed() {}
void fail_together() {}
void abort_run() { std::abort(); }
void sum_polling(std::span<float>, std::chrono::microseconds) {}
#endif

}  // namespace dist
}  // namespace kael::train
