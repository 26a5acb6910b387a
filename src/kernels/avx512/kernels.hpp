// The AVX-512 kernels (this folder, built with -mavx512f -mavx512bw -mavx512vl -mavx512dq
// -mavx512vnni on top of AVX2's flags), with the meanings of the KernelTable entries of the
// same names. Only fill() and the tests refer to them; they may run only where
// isa_supported(Isa::avx512), and the int8 GEMM only where CpuFeatures::avx512_vnni.
#pragma once

#include <cstdint>

#include "kernels/gemm.hpp"

namespace kael::kernels::avx512 {

void gemm_panels(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                 std::int64_t panel_stride, bool packed, std::int64_t M, std::int64_t N, std::int64_t K,
                 const float* bias, Epilogue epilogue);
void dequantize_f16_panel(float* dst, const std::uint16_t* panel, std::int64_t K, std::int64_t w);
void f16_gemv(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const std::uint16_t* b, std::int64_t M,
              std::int64_t panels, std::int64_t K, const float* bias, Epilogue epilogue);
void int8_gemm_vnni(float* c, std::int64_t ldc, const std::int8_t* xq, const float* xs, std::int64_t M,
                    std::int64_t Kp, const std::int8_t* w, const std::uint16_t* scales, std::int64_t panels,
                    std::int64_t n_valid, const float* bias, Epilogue epilogue);
void softmax(float* out, const float* inp, std::int64_t n);
void gelu_new(float* out, const float* inp, std::int64_t n);

}  // namespace kael::kernels::avx512
