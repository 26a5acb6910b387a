// The AVX-512 kernels (this folder, built with -mavx512f -mavx512bw -mavx512vl -mavx512dq
// -mavx512vnni on top of AVX2's flags), with the meanings of the KernelTable entries of the
// same names. Only fill() and the tests refer to them; they may run only where
// isa_supported(Isa::avx512), and the int8 GEMM only where CpuFeatures::avx512_vnni.
#pragma once

#include <cstdint>

#include "kernels/kernel_table.hpp"

namespace kael::kernels::avx512 {

Int8GemmFn int8_gemm_vnni;
AttendHeadFn attend_head;
GeluBackwardFn gelu_backward;
AdamWUpdateFn adamw_update;
SumOfSquaresFn sum_of_squares;

}  // namespace kael::kernels::avx512
