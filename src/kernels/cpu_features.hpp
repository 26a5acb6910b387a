// Which instruction set the fast kernels use, decided once at run time, so that one binary
// built for baseline x86-64 runs everywhere and uses AVX2+FMA where the CPU has them.
#pragma once

namespace kael::kernels {

enum class Isa { scalar, avx2 };

// "scalar" or "avx2".
const char* isa_name(Isa isa);

// The best set this CPU (and its OS) supports: avx2 needs AVX2 and FMA.
Isa detected_isa();

// The set the kernels use now: KAEL_ISA=scalar|avx2 when set (ValueError for another value,
// or for avx2 on a CPU without it), detected_isa() otherwise. Read once, then cached.
Isa active_isa();

// Forces the set (tests compare both paths in one binary). ValueError when the CPU lacks it.
// Not to be called while a kernel is running.
void set_isa(Isa isa);

// Physical cores (hyperthread siblings counted once) from /sys, falling back to the logical
// count when the topology is not readable. The default thread count.
int physical_cores();

}  // namespace kael::kernels
