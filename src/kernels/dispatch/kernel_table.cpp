// Which sets can run here, the one that runs, and the tables (kernel_table.hpp).
#include "kernels/dispatch/kernel_table.hpp"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string_view>

#include "kael/core/error.hpp"

namespace kael::kernels {
namespace {

// What `isa` needs beyond the set below it, or null when this CPU and build have it.
const char* missing(Isa isa, std::string* amx_reason) {
  [[maybe_unused]] const CpuFeatures& f = cpu_features();
  switch (isa) {
    case Isa::scalar: return nullptr;
#if KAEL_X86_KERNELS
    case Isa::avx2: return f.avx2 && f.fma && f.f16c ? nullptr : "this CPU (or its OS) lacks AVX2, FMA or F16C";
    case Isa::avx512:
      return f.avx512f && f.avx512bw && f.avx512vl ? nullptr : "this CPU (or its OS) lacks AVX-512 F, BW or VL";
#else
    case Isa::avx2:
    case Isa::avx512: return "this build is not for x86, so it has no AVX kernels";
#endif
    case Isa::amx:
#if KAEL_AMX_KERNELS
      if (!(f.amx_tile && f.amx_int8)) return "this CPU (or its OS) lacks AMX-TILE or AMX-INT8";
      if (!amx::available(f, amx_reason)) return "Linux refused the AMX tile state";
      return nullptr;
#else
      (void)amx_reason;
      return "this build has no AMX kernels (src/kernels/targets/amx/ is empty)";
#endif
    case Isa::neon:
#if KAEL_NEON_KERNELS
      return f.neon ? nullptr : "this CPU lacks Advanced SIMD";
#else
      return "this build is not for ARM64, so it has no NEON kernels";
#endif
  }
  return "unknown instruction set";
}

KernelTable build(Isa isa) {
  KernelTable table;
  portable::fill(table);
#if KAEL_X86_KERNELS
  const CpuFeatures& cpu = cpu_features();
  if (isa >= Isa::avx2 && isa <= Isa::amx) avx2::fill(table, cpu);
  if (isa >= Isa::avx512 && isa <= Isa::amx) avx512::fill(table, cpu);
#endif
#if KAEL_AMX_KERNELS
  if (isa == Isa::amx) amx::fill(table, cpu_features());
#endif
#if KAEL_NEON_KERNELS
  if (isa == Isa::neon) neon::fill(table, cpu_features());
#endif
  table.isa = isa;
  return table;
}

// The active table; null until the first active_kernels() resolves KAEL_ISA.
std::atomic<const KernelTable*> g_active{nullptr};

Isa from_environment() {
  const char* env = std::getenv("KAEL_ISA");
  if (env == nullptr || *env == '\0') return detected_isa();
  const std::string_view value(env);
  for (Isa isa : kAllIsas)
    if (value == isa_name(isa)) {
      std::string why;
      if (!isa_supported(isa, &why)) throw ValueError(str("KAEL_ISA=", value, ", but ", why));
      return isa;
    }
  throw ValueError(str("KAEL_ISA='", value, "' is not an instruction set kael knows (expected scalar, avx2, avx512, amx or neon)"));
}

}  // namespace

bool isa_supported(Isa isa, std::string* why) {
  // A set needs the one it builds on, and that one its own base, down to scalar.
  for (Isa level = isa;; level = base_isa(level)) {
    std::string reason;
    if (const char* m = missing(level, &reason)) {
      if (why != nullptr) *why = reason.empty() ? std::string(m) : str(m, ": ", reason);
      return false;
    }
    if (level == Isa::scalar) return true;
  }
}

Isa detected_isa() {
  static const Isa best = [] {
    Isa found = Isa::scalar;
    for (Isa isa : kAllIsas)
      if (isa_supported(isa)) found = isa;
    return found;
  }();
  return best;
}

const KernelTable& kernels_for(Isa isa) {
  static std::mutex mutex;
  static KernelTable tables[std::size(kAllIsas)];
  static bool built[std::size(kAllIsas)] = {};
  const std::lock_guard lock(mutex);
  const auto i = static_cast<std::size_t>(isa);
  if (!built[i]) {
    std::string why;
    if (!isa_supported(isa, &why)) throw ValueError(str("cannot use the ", isa_name(isa), " kernels: ", why));
    tables[i] = build(isa);
    built[i] = true;
  }
  return tables[i];
}

const KernelTable& active_kernels() {
  const KernelTable* table = g_active.load(std::memory_order_acquire);
  if (table == nullptr) {
    table = &kernels_for(from_environment());
    g_active.store(table, std::memory_order_release);
  }
  return *table;
}

Isa active_isa() { return active_kernels().isa; }

void set_isa(Isa isa) { g_active.store(&kernels_for(isa), std::memory_order_release); }

}  // namespace kael::kernels
