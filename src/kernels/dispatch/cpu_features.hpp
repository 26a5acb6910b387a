// What this CPU and its OS offer the kernels, read once (x86: CPUID and XGETBV; ARM64 Linux:
// getauxval(AT_HWCAP); macOS: sysctlbyname), and which instruction set the kernels use
// (kernel_table.hpp holds the kernels of each).
#pragma once

#include <string>

namespace kael::kernels {

// In order of preference. Each set builds on one below it (base_isa): the x86 sets on each
// other, neon on scalar.
//   scalar: plain C++ for the baseline target (any CPU);
//   avx2:   AVX2 + FMA + F16C (Haswell, Zen 1 and later), int8 dots with AVX-VNNI where present;
//   avx512: AVX-512 F/BW/VL on top (Skylake-SP, Zen 4 and later), int8 dots with AVX512-VNNI;
//   amx:    AMX tiles on top (Sapphire Rapids and later). Its kernels come from src/kernels/targets/amx/;
//           a build without them reports amx as not built;
//   neon:   ARM64's Advanced SIMD (every ARMv8-A CPU), int8 dots with SDOT where the CPU has
//           the dot-product extension (ARMv8.2-A+dotprod: Cortex-A76/Neoverse N1, Apple M1 and
//           later). Built only for an aarch64 target.
enum class Isa { scalar, avx2, avx512, amx, neon };
inline constexpr Isa kAllIsas[] = {Isa::scalar, Isa::avx2, Isa::avx512, Isa::amx, Isa::neon};

// "scalar", "avx2", "avx512", "amx", "neon".
const char* isa_name(Isa isa);

// The set `isa` starts from and needs (scalar for scalar itself).
Isa base_isa(Isa isa);

// Instruction-set extensions, each true only when the CPU has it AND the OS saves the
// registers it needs (XCR0: YMM for AVX, opmask/ZMM for AVX-512, XTILECFG/XTILEDATA for AMX).
// AMX needs one more step at run time: Linux grants the tile state per process on request.
struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false, avx_vnni = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512_vnni = false, avx512_bf16 = false;
  bool amx_tile = false, amx_int8 = false, amx_bf16 = false;
  // ARM64: Advanced SIMD (always there on aarch64), SDOT/UDOT (HWCAP_ASIMDDP) and FP16
  // arithmetic (HWCAP_FPHP and HWCAP_ASIMDHP).
  bool neon = false, dotprod = false, fp16 = false;
};

// Detected once. KAEL_VNNI=0 in the environment hides AVX-VNNI and AVX512-VNNI, so the int8
// kernels use pmaddubsw instead (to compare the two, or to work around a faulty virtual CPU);
// KAEL_DOTPROD=0 likewise hides SDOT, so the ARM int8 kernel uses its plain NEON path.
const CpuFeatures& cpu_features();

// Whether the kernels of `isa` can run here; when not, `why` (if given) says what is missing.
bool isa_supported(Isa isa, std::string* why = nullptr);

// The best supported set.
Isa detected_isa();

// The set the kernels use now: KAEL_ISA=scalar|avx2|avx512|amx|neon when set (ValueError for
// another value, or for a set this CPU or this build lacks, naming what is missing),
// detected_isa() otherwise. Read once, then cached.
Isa active_isa();

// Forces the set (tests run every kernel on every set). ValueError when it is not supported.
// Not to be called while a kernel is running.
void set_isa(Isa isa);

// Physical cores (hyperthread siblings counted once): Linux's /sys topology, macOS's
// hw.physicalcpu, and the logical count where neither can be read. The default thread count.
int physical_cores();

}  // namespace kael::kernels
