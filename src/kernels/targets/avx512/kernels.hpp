// The AVX-512 kernels (this folder, built with -mavx512f -mavx512bw -mavx512vl -mavx512dq
// -mavx512vnni on top of AVX2's flags), with the meanings of the KernelTable entries of the
// same names. Only fill() and the tests refer to them; they may run only where
// isa_supported(Isa::avx512), the VNNI ones only where CpuFeatures::avx512_vnni, and the BF16
// ones (the *_bf16.cpp units, built with -mavx512bf16 too) only where avx512_bf16.
#pragma once

#include <cstdint>

#include "kernels/dispatch/kernel_table.hpp"

namespace kael::kernels::avx512 {

Int8GemmFn int8_gemm_vnni;
// amx.hpp's formats without tiles: per-column int8 (VNNI) and BF16.
Int8cQuantizeRowsFn int8c_quantize_rows;
Int8cGemmFn int8c_gemv;
Bf16PackRowsFn bf16_pack_rows;
Bf16PackPanelsFn bf16_pack_panels;
Bf16PackPanelsSumsFn bf16_pack_panels_sums;
Bf16PackBothFn bf16_pack_both;
Bf16GemmFn gemm_bf16_gemv;

// The training family's entries (training.cpp, built with -ffp-contract=off).
void fill_training(KernelTable& table);

}  // namespace kael::kernels::avx512
