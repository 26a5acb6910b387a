// int8 weights with int8 activations: the layout of a quantized matrix, the quantizers (the
// weights once at load, the activations at every call) and the integer-dot GEMM.
//
// Weights: symmetric int8 with one scale per group of kInt8Group consecutive k of a column
// (as llama.cpp's q8_0): w[k][n] ~ q[k][n] * scale[k / 32][n], |q| <= 127, the scale a BF16
// (F32's range: any weight magnitude fits). A group is the unit of error: one large weight only
// coarsens its own 32 neighbours, not the whole column.
// Activations get the same treatment per row at every call: x[t][k] ~ xq[t][k] * xs[t][k / 32]
// (an F32 scale). The product of a row and a column is then
//   y[t][n] = sum over groups g, in order, of  float(dot_g) * (xs[t][g] * scale[g][n])
// with dot_g the exact int32 dot of the 32 int8 pairs: integer arithmetic does the bulk, so
// the kernels are bound by the weight bytes (a quarter of F32's) rather than by conversions.
//
// Layout (padded, so the kernels never see ragged tiles): K rounds up to Kp, a multiple of 32,
// and N to Np, a multiple of 16, with zero weights. Panel p holds columns [16p, 16p + 16) at
// byte 16 * Kp * p; inside it, k4 block b (k = 4b .. 4b + 3) takes 64 bytes: column j's four
// weights at byte 64 b + 4 j + (k % 4). This is the operand order of the x86 byte dot products
// (pmaddubsw, vpdpbusd: four adjacent bytes per 32-bit lane), so a 32-byte load is four k of
// eight columns. Scales: panel p, group g at scales[(p * Kp / 32 + g) * 16 + j].
#pragma once

#include <cstdint>

#include "kernels/gemm.hpp"

namespace kael::kernels {

inline constexpr std::int64_t kInt8Group = 32;

constexpr std::int64_t int8_padded_k(std::int64_t K) { return (K + kInt8Group - 1) / kInt8Group * kInt8Group; }
constexpr std::int64_t int8_padded_n(std::int64_t N) { return (N + kPanel - 1) / kPanel * kPanel; }
// Sizes of the two arrays of an int8 (K, N) matrix: bytes of weights, count of BF16 scales.
constexpr std::int64_t int8_weight_bytes(std::int64_t K, std::int64_t N) {
  return int8_padded_k(K) * int8_padded_n(N);
}
constexpr std::int64_t int8_scale_count(std::int64_t K, std::int64_t N) {
  return int8_padded_k(K) / kInt8Group * int8_padded_n(N);
}

// q (int8_weight_bytes) and scales (int8_scale_count, BF16 bits) from element (k, n) of src:
// src[k * N + n], or src[n * K + k] with `transposed` (the output head, stored as wte (N, K)).
// Each group's scale is max |w| / 127 rounded up to a BF16, and the weights are rounded to
// nearest with that stored scale (so |q| <= 127 without clipping). A group of zeros gets scale
// 0. ValueError naming (k, n) when a weight is not finite.
void quantize_int8_panels(std::int8_t* q, std::uint16_t* scales, const float* src, std::int64_t K, std::int64_t N,
                          bool transposed);

// Weight (k, n) as F32: q * scale.
float int8_weight(const std::int8_t* q, const std::uint16_t* scales, std::int64_t K, std::int64_t k, std::int64_t n);

// xq (T, Kp) and xs (T, Kp / 32) from x (T, K): per row and group, scale = max |x| / 127 and
// xq = round-to-nearest-even(x * (127 / max |x|)); padding and all-zero groups give 0.
// A group holding an infinity or NaN gets scale NaN, so the outputs it feeds are NaN, as
// they would be in F32.
void quantize_rows(std::int8_t* xq, float* xs, const float* x, std::int64_t T, std::int64_t K);

// out (T, N) = epilogue(x (T, K) @ W + bias) for an int8 W, as in the header comment; the
// activations are quantized here. Each row's result is independent of T and of the threads.
void int8_linear(float* out, const float* x, const std::int8_t* q, const std::uint16_t* scales, const float* bias,
                 std::int64_t T, std::int64_t K, std::int64_t N, Epilogue epilogue = Epilogue::store);

// The int8 byte dot product of the active kernels: "scalar", "pmaddubsw", "avx-vnni",
// "avx512-vnni", "neon-sdot" or "neon-smull" (KernelTable::int8_dot; KAEL_VNNI=0 hides VNNI
// and KAEL_DOTPROD=0 hides SDOT, cpu_features.hpp).
const char* int8_dot_name();

}  // namespace kael::kernels
