// The per-instruction-set halves of the kernels, behind the dispatching functions of
// gemm.hpp, norm.hpp and elementwise.hpp. `portable` is plain C++ built for baseline x86-64
// (portable.cpp); `avx2` is built with -mavx2 -mfma -mf16c (avx2/*.cpp) and may only be called
// when active_isa() is Isa::avx2. Neither starts threads: the dispatchers split the work.
//
// Declarations only: an inline function defined in a header and compiled in an AVX2 unit
// could be picked by the linker for baseline callers and crash a CPU without AVX2.
#pragma once

#include <cstdint>

#include "kernels/gemm.hpp"

namespace kael::kernels {

namespace portable {
// Panels [0, ceil(N / 16)) of b: panel p starts at b + p * panel_stride, with row stride ldb,
// except the narrower last panel of a packed matrix, whose row stride is its width. c, bias
// (may be null) and the columns all start at panel 0. c (M, N; ldc), a (M, K; lda).
void gemm_panels(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                 std::int64_t panel_stride, bool packed, std::int64_t M, std::int64_t N, std::int64_t K,
                 const float* bias, Epilogue epilogue);
// As kernels::gemm_nt.
void gemm_nt(float* out, std::int64_t ldo, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
             std::int64_t M, std::int64_t N, std::int64_t K, float scale);
// out (n) = softmax(inp); out may equal inp.
void softmax(float* out, const float* inp, std::int64_t n);
// out (n) = gelu_new(inp); out may equal inp.
void gelu_new(float* out, const float* inp, std::int64_t n);
}  // namespace portable

// The same functions, with AVX2 and FMA.
namespace avx2 {
void gemm_panels(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                 std::int64_t panel_stride, bool packed, std::int64_t M, std::int64_t N, std::int64_t K,
                 const float* bias, Epilogue epilogue);
void gemm_nt(float* out, std::int64_t ldo, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
             std::int64_t M, std::int64_t N, std::int64_t K, float scale);
void softmax(float* out, const float* inp, std::int64_t n);
void gelu_new(float* out, const float* inp, std::int64_t n);
}  // namespace avx2

}  // namespace kael::kernels
