// The NEON kernels (this folder, built only for ARM64), with the meanings of the KernelTable
// entries of the same names. Only fill() and the tests refer to them. Advanced SIMD is part
// of every AArch64 CPU, so they run wherever isa_supported(Isa::neon).
#pragma once

#include <cstdint>

#include "kernels/dispatch/kernel_table.hpp"

namespace kael::kernels::neon {

// The int8 GEMM with widening multiplies (smull + sadalp: any ARMv8-A CPU), and with SDOT
// (int8_dotprod.cpp, ARMv8.2-A dot product: only where CpuFeatures::dotprod). Equal bits.
Int8GemmFn int8_gemm;
Int8GemmFn int8_gemm_sdot;

// The training family's entries (training.cpp, built with -ffp-contract=off).
void fill_training(KernelTable& table);

}  // namespace kael::kernels::neon
