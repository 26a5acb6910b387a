// The portable kernels: plain C++ for the baseline target, used on CPUs without AVX2 or with
// KAEL_ISA=scalar, and as the base every other table starts from (kernel_table.hpp). The
// entries of KernelTable, with the same meanings.
#pragma once

#include <cstdint>

#include "kernels/dispatch/kernel_table.hpp"

namespace kael::kernels::portable {

GemmPanelsFn gemm_panels;
GemmNtFn gemm_nt;
GemvRowsFn gemv_rows;
DequantizeF16Fn dequantize_f16_panel;
// The scalar form of the activation quantizer, which the references use too.
QuantizeRowsFn quantize_rows;
Int8GemmFn int8_gemm;
GeluBackwardFn gelu_backward;
AdamWUpdateFn adamw_update;
SumOfSquaresFn sum_of_squares;

}  // namespace kael::kernels::portable
