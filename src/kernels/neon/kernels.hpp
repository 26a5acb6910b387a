// The NEON kernels (this folder, built only for ARM64), with the meanings of the KernelTable
// entries of the same names. Only fill() and the tests refer to them. Advanced SIMD is part
// of every AArch64 CPU; int8_gemm_sdot (int8_dotprod.cpp) may run only where
// CpuFeatures::dotprod.
#pragma once

#include <cstdint>

#include "kernels/gemm.hpp"

namespace kael::kernels::neon {

void gemm_panels(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                 std::int64_t panel_stride, bool packed, std::int64_t M, std::int64_t N, std::int64_t K,
                 const float* bias, Epilogue epilogue);
void gemm_nt(float* out, std::int64_t ldo, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
             std::int64_t M, std::int64_t N, std::int64_t K, float scale);
void dequantize_f16_panel(float* dst, const std::uint16_t* panel, std::int64_t K, std::int64_t w);
void f16_gemv(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const std::uint16_t* b, std::int64_t M,
              std::int64_t panels, std::int64_t K, const float* bias, Epilogue epilogue);
// The int8 GEMM with widening multiplies (smull + sadalp: any ARMv8-A CPU).
void int8_gemm(float* c, std::int64_t ldc, const std::int8_t* xq, const float* xs, std::int64_t M, std::int64_t Kp,
               const std::int8_t* w, const std::uint16_t* scales, std::int64_t panels, std::int64_t n_valid,
               const float* bias, Epilogue epilogue);
// The same with SDOT (ARMv8.2-A dot product): only where CpuFeatures::dotprod. Equal bits.
void int8_gemm_sdot(float* c, std::int64_t ldc, const std::int8_t* xq, const float* xs, std::int64_t M,
                    std::int64_t Kp, const std::int8_t* w, const std::uint16_t* scales, std::int64_t panels,
                    std::int64_t n_valid, const float* bias, Epilogue epilogue);
void softmax(float* out, const float* inp, std::int64_t n);
void gelu_new(float* out, const float* inp, std::int64_t n);

}  // namespace kael::kernels::neon
