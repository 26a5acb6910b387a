// Block matrices stored narrower than F32 to cut the bytes decode streams per token: F16, in
// the panel layout of gemm.hpp (16 columns per panel, panel p at element 16 * p * K, the narrow
// last panel's rows its width apart), or int8 with per-group scales in the layout of int8.hpp
// (int8 activations too: integer dot products). linear_matrix takes any of them.
//
// F16 kernel design: the full panels go through KernelTable::f16_gemm where the set has one (and
// for up to f16_gemm_rows rows), whose tiles convert a vector of weights at a time in registers and
// feed the FMAs directly (the F32 GEMM's tiles and blocking, reading F16 panel rows); the ragged
// last panel, and the other cases, are dequantized into an F32 scratch block that stays
// in L2 and run through the F32 micro-kernels of gemm.hpp, bias and epilogue included. Both compute y = sum_k a[k] * float(h[k][n]) + bias[n] as one
// ordered FMA chain per output whatever T, the path or the thread count, as linear_packed does.
#pragma once

#include <cstdint>

#include "kael/core/dtype.hpp"
#include "kernels/gemm.hpp"
#include "kernels/int8.hpp"

namespace kael::kernels {

// A packed (K, N) matrix of any WeightDType; scales (BF16 bits, int8.hpp) only for int8.
// With `tiles`, data is one block in a format of amx.hpp (bf16 always; int8 with per-column
// scales on the amx set).
struct PackedMatrix {
  WeightDType type = WeightDType::f32;
  const void* data = nullptr;
  const std::uint16_t* scales = nullptr;
  bool tiles = false;
};

// F16 (IEEE half bits, round to nearest even) panels from element (k, n) of src, which is
// src[k * N + n], or src[n * K + k] with `transposed` (the output head stored as wte (N, K)).
void convert_f16_panels(std::uint16_t* dst, const float* src, std::int64_t K, std::int64_t N, bool transposed);

// out (T, N) = epilogue(inp (T, K) @ W + bias) for W of any type; f32 is linear_packed.
void linear_matrix(float* out, const float* inp, const PackedMatrix& w, const float* bias, std::int64_t T,
                   std::int64_t K, std::int64_t N, Epilogue epilogue = Epilogue::store);

// Column n of the matrix as F32 (dequantized): out (K).
void unpack_matrix_column(float* out, const PackedMatrix& w, std::int64_t K, std::int64_t N, std::int64_t n);

namespace ref {
// The reference for linear_matrix: multiplies in double what the kernels multiply, the
// dequantized weights by the inputs, or for int8 by the inputs as quantize_rows rounds them.
void linear_matrix(float* out, const float* inp, const PackedMatrix& w, const float* bias, std::int64_t T,
                   std::int64_t K, std::int64_t N, Epilogue epilogue = Epilogue::store);
}  // namespace ref

}  // namespace kael::kernels
