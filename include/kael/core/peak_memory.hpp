// The process's peak resident memory, as benchmarks and `kael finetune` report it.
#pragma once

#include <sys/resource.h>

#include <cstdio>

namespace kael {

// This process's peak resident memory in bytes. Linux's VmHWM (/proc/self/status) counts only
// this program's own memory: getrusage's ru_maxrss carries over, across exec, the resident
// memory of the process that started this one (a benchmark script holding models of its own
// would have its memory counted as kael's). ru_maxrss is the fallback where /proc is missing.
inline long long peak_rss_bytes() {
  if (std::FILE* status = std::fopen("/proc/self/status", "r")) {
    char line[256];
    long long kilobytes = -1;
    while (std::fgets(line, sizeof(line), status) != nullptr)
      if (std::sscanf(line, "VmHWM: %lld kB", &kilobytes) == 1) break;
    std::fclose(status);
    if (kilobytes >= 0) return kilobytes * 1024;
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<long long>(usage.ru_maxrss) * 1024;  // KiB on Linux
}

}  // namespace kael
