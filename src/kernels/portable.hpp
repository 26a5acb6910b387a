// The portable kernels: plain C++ for the baseline target, used on CPUs without AVX2 or with
// KAEL_ISA=scalar, and as the base every other table starts from (kernel_table.hpp). The
// entries of KernelTable, with the same meanings.
#pragma once

#include <cstdint>

#include "kernels/gemm.hpp"

namespace kael::kernels::portable {

void gemm_panels(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                 std::int64_t panel_stride, bool packed, std::int64_t M, std::int64_t N, std::int64_t K,
                 const float* bias, Epilogue epilogue);
void gemm_nt(float* out, std::int64_t ldo, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
             std::int64_t M, std::int64_t N, std::int64_t K, float scale);
void dequantize_f16_panel(float* dst, const std::uint16_t* panel, std::int64_t K, std::int64_t w);
// The scalar form of the activation quantizer, which the references use too.
void quantize_rows(std::int8_t* xq, float* xs, const float* x, std::int64_t T, std::int64_t K);
void int8_gemm(float* c, std::int64_t ldc, const std::int8_t* xq, const float* xs, std::int64_t M, std::int64_t Kp,
               const std::int8_t* w, const std::uint16_t* scales, std::int64_t panels, std::int64_t n_valid,
               const float* bias, Epilogue epilogue);

}  // namespace kael::kernels::portable
