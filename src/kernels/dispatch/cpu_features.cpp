#include "kernels/dispatch/cpu_features.hpp"

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#elif defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif
#if defined(__APPLE__)
#include <sys/sysctl.h>
#endif

namespace kael::kernels {
namespace {

#if defined(__x86_64__) || defined(__i386__)
bool bit(unsigned word, int n) { return ((word >> n) & 1u) != 0; }

// XCR0: which register states the OS saves on a context switch (only valid with OSXSAVE).
unsigned long long xcr0() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<unsigned long long>(hi) << 32) | lo;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool fma = bit(c, 12), osxsave = bit(c, 27), avx = bit(c, 28), f16c = bit(c, 29);
  if (!osxsave || !avx) return f;
  const unsigned long long xcr = xcr0();
  const bool os_ymm = (xcr & 0x6) == 0x6;            // SSE and AVX state
  const bool os_zmm = os_ymm && (xcr & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  const bool os_tiles = (xcr & 0x60000) == 0x60000;   // XTILECFG, XTILEDATA
  if (!os_ymm) return f;
  unsigned b7 = 0, c7 = 0, d7 = 0, a7_1 = 0;
  if (__get_cpuid_count(7, 0, &a, &b7, &c7, &d7)) {
    unsigned b1 = 0, c1 = 0, d1 = 0;
    if (a >= 1) __get_cpuid_count(7, 1, &a7_1, &b1, &c1, &d1);
  }
  f.fma = fma;
  f.f16c = f16c;
  f.avx2 = bit(b7, 5);
  f.avx_vnni = bit(a7_1, 4);
  if (os_zmm) {
    f.avx512f = bit(b7, 16);
    f.avx512bw = bit(b7, 30);
    f.avx512vl = bit(b7, 31);
    f.avx512_vnni = bit(c7, 11);
    f.avx512_bf16 = bit(a7_1, 5);
  }
  if (os_tiles) {
    f.amx_bf16 = bit(d7, 22);
    f.amx_tile = bit(d7, 24);
    f.amx_int8 = bit(d7, 25);
  }
  const char* vnni = std::getenv("KAEL_VNNI");
  if (vnni != nullptr && std::string_view(vnni) == "0") f.avx_vnni = f.avx512_vnni = false;
  return f;
}
#elif defined(__aarch64__)
#if defined(__APPLE__)
// A sysctl flag such as hw.optional.arm.FEAT_DotProd: 1 when present, absent on older macOS.
bool sysctl_flag(const char* name) {
  int value = 0;
  std::size_t size = sizeof value;
  return sysctlbyname(name, &value, &size, nullptr, 0) == 0 && value != 0;
}
#endif

CpuFeatures detect() {
  CpuFeatures f;
  f.neon = true;  // Advanced SIMD is part of every ARMv8-A (AArch64) CPU
#if defined(__linux__)
  const unsigned long hwcap = getauxval(AT_HWCAP);
  f.dotprod = (hwcap & HWCAP_ASIMDDP) != 0;
  f.fp16 = (hwcap & HWCAP_FPHP) != 0 && (hwcap & HWCAP_ASIMDHP) != 0;
#elif defined(__APPLE__)
  f.dotprod = sysctl_flag("hw.optional.arm.FEAT_DotProd");
  f.fp16 = sysctl_flag("hw.optional.arm.FEAT_FP16");
#endif
  const char* dotprod = std::getenv("KAEL_DOTPROD");
  if (dotprod != nullptr && std::string_view(dotprod) == "0") f.dotprod = false;
  return f;
}
#else
CpuFeatures detect() { return {}; }
#endif

#if defined(__APPLE__)
int sysctl_int(const char* name) {
  int value = 0;
  std::size_t size = sizeof value;
  return sysctlbyname(name, &value, &size, nullptr, 0) == 0 ? value : 0;
}
#endif

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    case Isa::amx: return "amx";
    case Isa::neon: return "neon";
  }
  return "?";
}

Isa base_isa(Isa isa) {
  switch (isa) {
    case Isa::avx512: return Isa::avx2;
    case Isa::amx: return Isa::avx512;
    default: return Isa::scalar;
  }
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

int physical_cores() {
  const unsigned logical = std::thread::hardware_concurrency();
#if defined(__APPLE__)
  if (const int cores = sysctl_int("hw.physicalcpu"); cores > 0) return cores;
#endif
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
