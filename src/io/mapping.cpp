#include "io/mapping.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <mutex>

#include "kael/core/error.hpp"
#include "kael/io/safetensors.hpp"

namespace kael::io {
namespace {

// The address ranges of live mappings, readable from a signal handler (lock-free atomics, no
// allocation). A mapping that finds no free slot is not made (the file is read instead).
struct GuardedRange {
  std::atomic<std::uintptr_t> begin{0};
  std::atomic<std::uintptr_t> end{0};
};
constexpr std::size_t kMaxGuarded = 256;
std::array<GuardedRange, kMaxGuarded> guarded;
std::atomic<std::uint64_t> zeroed_pages{0};
std::uintptr_t page_bytes = 4096;
struct sigaction previous_action {};

// SIGBUS inside one of our mappings: the file ended before the page. An anonymous zero page
// mapped over it lets the faulting read complete (mmap is a plain system call, safe here).
// Any other SIGBUS goes where it would have gone without us.
void on_sigbus(int signal_number, siginfo_t* info, void* context) {
  const auto address = reinterpret_cast<std::uintptr_t>(info->si_addr);
  for (const GuardedRange& range : guarded) {
    if (address < range.begin.load(std::memory_order_acquire) || address >= range.end.load(std::memory_order_acquire))
      continue;
    void* page = reinterpret_cast<void*>(address / page_bytes * page_bytes);
    if (::mmap(page, page_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
      zeroed_pages.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  if ((previous_action.sa_flags & SA_SIGINFO) && previous_action.sa_sigaction) {
    previous_action.sa_sigaction(signal_number, info, context);
  } else if (!(previous_action.sa_flags & SA_SIGINFO) && previous_action.sa_handler != SIG_DFL &&
             previous_action.sa_handler != SIG_IGN) {
    previous_action.sa_handler(signal_number);
  } else {
    ::signal(SIGBUS, SIG_DFL);  // returning re-runs the faulting access, now fatal as usual
  }
}

void install_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    page_bytes = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    struct sigaction action {};
    action.sa_sigaction = on_sigbus;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &previous_action);
  });
}

GuardedRange* guard(std::uintptr_t begin, std::uintptr_t end) {
  install_handler();
  for (GuardedRange& range : guarded) {
    std::uintptr_t free = 0;
    if (range.begin.compare_exchange_strong(free, begin, std::memory_order_acq_rel)) {
      range.end.store(end, std::memory_order_release);
      return &range;
    }
  }
  return nullptr;
}

void unguard(std::uintptr_t begin) {
  for (GuardedRange& range : guarded) {
    if (range.begin.load(std::memory_order_acquire) != begin) continue;
    range.end.store(0, std::memory_order_release);
    range.begin.store(0, std::memory_order_release);
    return;
  }
}

}  // namespace

std::shared_ptr<Mapping> Mapping::map(int fd, std::uint64_t size) {
  if (size == 0 || size > std::numeric_limits<std::size_t>::max()) return nullptr;
  void* address = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  if (address == MAP_FAILED) return nullptr;
  const auto begin = reinterpret_cast<std::uintptr_t>(address);
  if (!guard(begin, begin + static_cast<std::uintptr_t>(size))) {
    ::munmap(address, static_cast<std::size_t>(size));
    return nullptr;
  }
  return std::shared_ptr<Mapping>(new Mapping(static_cast<std::byte*>(address), size));
}

Mapping::~Mapping() {
  unguard(reinterpret_cast<std::uintptr_t>(data_));
  ::munmap(data_, static_cast<std::size_t>(size_));
}

void check_mappings_intact(std::string_view source) {
  const std::uint64_t pages = zeroed_pages.load(std::memory_order_relaxed);
  if (pages != 0)
    throw Error(str(source, " shrank while it was mapped and being read (", pages,
                    " missing pages read as zeros): the result is void"));
}

void release_mapped_pages(const Tensor& tensor) {
  if (!tensor.is_borrowed()) return;
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(tensor.raw_data());
  const std::uintptr_t first = (begin + page - 1) / page * page, last = (begin + tensor.nbytes()) / page * page;
  // Pages shared with a neighbouring tensor stay. MADV_DONTNEED on a private file mapping
  // drops the pages (and any private copies) on Linux; macOS takes it as a hint only. Either
  // way, failure only means the memory stays in use.
  if (first < last) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace kael::io
