// The AVX2 kernels (this folder, built with -mavx2 -mfma -mf16c), with the meanings of the
// KernelTable entries of the same names. Only fill() and the tests refer to them; they may
// run only where isa_supported(Isa::avx2).
#pragma once

#include <cstdint>

#include "kernels/dispatch/kernel_table.hpp"

namespace kael::kernels::avx2 {

QuantizeRowsFn quantize_rows;
// The int8 GEMM with pmaddubsw (any AVX2 CPU), and with AVX-VNNI's vpdpbusd (int8_vnni.cpp:
// only where CpuFeatures::avx_vnni). Equal bits.
Int8GemmFn int8_gemm;
Int8GemmFn int8_gemm_vnni;

// The training family's entries (training.cpp, built with -ffp-contract=off).
void fill_training(KernelTable& table);

}  // namespace kael::kernels::avx2
