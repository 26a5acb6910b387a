#include "kernels/cpu_features.hpp"

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "kael/core/error.hpp"

namespace kael::kernels {
namespace {

// -1 until the first active_isa() call resolves KAEL_ISA.
std::atomic<int> g_isa{-1};

Isa from_environment() {
  const char* env = std::getenv("KAEL_ISA");
  if (env == nullptr || *env == '\0') return detected_isa();
  const std::string_view value(env);
  if (value == "scalar") return Isa::scalar;
  if (value == "avx2") {
    if (detected_isa() != Isa::avx2) throw ValueError("KAEL_ISA=avx2, but this CPU lacks AVX2 or FMA");
    return Isa::avx2;
  }
  throw ValueError(str("KAEL_ISA='", value, "' is not an instruction set kael knows (expected scalar or avx2)"));
}

}  // namespace

const char* isa_name(Isa isa) { return isa == Isa::avx2 ? "avx2" : "scalar"; }

Isa detected_isa() {
  // libgcc's check includes the OS's XSAVE support for the YMM registers.
  __builtin_cpu_init();
  // F16C (every AVX2 CPU has it) converts the F16 weights of quant.hpp.
  const bool f16c = __builtin_cpu_supports("f16c");
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c ? Isa::avx2 : Isa::scalar;
}

Isa active_isa() {
  int isa = g_isa.load(std::memory_order_relaxed);
  if (isa < 0) {
    isa = static_cast<int>(from_environment());
    g_isa.store(isa, std::memory_order_relaxed);
  }
  return static_cast<Isa>(isa);
}

void set_isa(Isa isa) {
  if (isa == Isa::avx2 && detected_isa() != Isa::avx2)
    throw ValueError("cannot use the avx2 kernels: this CPU lacks AVX2 or FMA");
  g_isa.store(static_cast<int>(isa), std::memory_order_relaxed);
}

int physical_cores() {
  const unsigned logical = std::thread::hardware_concurrency();
  std::set<std::pair<std::string, std::string>> cores;  // (package, core) pairs
  for (unsigned cpu = 0; cpu < logical; ++cpu) {
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream package_file(dir + "physical_package_id"), core_file(dir + "core_id");
    std::string package, core;
    if (!(package_file >> package) || !(core_file >> core)) {
      cores.clear();
      break;
    }
    cores.emplace(package, core);
  }
  if (!cores.empty()) return static_cast<int>(cores.size());
  return logical == 0 ? 1 : static_cast<int>(logical);
}

}  // namespace kael::kernels
