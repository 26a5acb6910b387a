// Block matrices stored narrower than F32 to cut the bytes decode streams per token:
// int8 with one F32 scale per output column (symmetric, round to nearest: w ~ q * scale,
// |q| <= 127), or F16. Same panel layout as gemm.hpp (16 columns per panel, panel p at
// element 16 * p * K, the narrow last panel's rows its width apart); only the element type
// differs. Activations and accumulation stay F32.
//
// Kernel design: each thread dequantizes a few panels at a time (q * scale, or F16 -> F32)
// into an F32 scratch block that stays in L2, and runs the F32 micro-kernels of gemm.hpp on
// it, bias and epilogue included. The int8 path thus reads a quarter of the F32 bytes from
// memory (what bounds decode) and reuses the tuned GEMV/GEMM for the arithmetic, prefill
// included. Decode (1-2 rows) on AVX2 skips the scratch: avx2::narrow_gemv converts in
// registers. y = sum_k a[k] * (q[k][n] * scale[n]) + bias[n], one ordered FMA chain per output
// whatever T, the path or the thread count, as for linear_packed.
#pragma once

#include <cstdint>

#include "kernels/gemm.hpp"

namespace kael::kernels {

enum class WeightType : std::uint8_t { f32, f16, int8 };

// A packed (K, N) matrix of any WeightType. scales (N) only for int8.
struct PackedMatrix {
  WeightType type = WeightType::f32;
  const void* data = nullptr;
  const float* scales = nullptr;
};

// int8: dst (K * N int8, packed) and scales (N) from element (k, n) of src, which is
// src[k * N + n], or src[n * K + k] with `transposed` (the output head stored as wte (N, K)).
// A column of zeros gets scale 0.
void quantize_int8_panels(std::int8_t* dst, float* scales, const float* src, std::int64_t K, std::int64_t N,
                          bool transposed);
// F16 (IEEE half bits, round to nearest even), the same layouts.
void convert_f16_panels(std::uint16_t* dst, const float* src, std::int64_t K, std::int64_t N, bool transposed);

// out (T, N) = epilogue(inp (T, K) @ W + bias) for W of any type; f32 is linear_packed.
void linear_matrix(float* out, const float* inp, const PackedMatrix& w, const float* bias, std::int64_t T,
                   std::int64_t K, std::int64_t N, Epilogue epilogue = Epilogue::store);

// Column n of the matrix as F32 (dequantized): out (K).
void unpack_matrix_column(float* out, const PackedMatrix& w, std::int64_t K, std::int64_t N, std::int64_t n);

// F32 <-> F16 bits, scalar (round to nearest even; the references and the conversion at load).
std::uint16_t f32_to_f16(float x);
float f16_to_f32(std::uint16_t h);

namespace ref {
// Dequantizes and multiplies in double: the reference for linear_matrix.
void linear_matrix(float* out, const float* inp, const PackedMatrix& w, const float* bias, std::int64_t T,
                   std::int64_t K, std::int64_t N, Epilogue epilogue = Epilogue::store);
}  // namespace ref

namespace portable {
// dst (K, w) F32 = one panel (K, w) of type `type` (f16 or int8), int8 times scales (w).
void dequantize_panel(float* dst, const void* panel, const float* scales, WeightType type, std::int64_t K,
                      std::int64_t w);
}  // namespace portable
namespace avx2 {
void dequantize_panel(float* dst, const void* panel, const float* scales, WeightType type, std::int64_t K,
                      std::int64_t w);
// c (M, 16 panels; ldc) = epilogue(a (M, K; lda) @ `panels` full int8 or F16 panels at b
// (scales: int8's, from the first panel's column) + bias), converting in registers: the decode
// path. Equal bits to dequantize_panel followed by gemm_panels.
void narrow_gemv(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const void* b, const float* scales,
                 WeightType type, std::int64_t M, std::int64_t panels, std::int64_t K, const float* bias,
                 Epilogue epilogue);
}  // namespace avx2

}  // namespace kael::kernels
