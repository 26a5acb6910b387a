// Intel AMX (tile registers, TMUL) and the two weight formats it multiplies, each with the
// AVX-512 GEMV that serves decode (few rows), where streaming the weights bounds the speed and
// a tile's 16 rows would sit mostly empty.
//
// Both formats cut the columns into panels of 16 (kPanel) and pad K and N with zeros, so that a
// panel's k-block is exactly one B tile (16 rows of 64 bytes, 64 bytes apart):
//
// BF16 (`bf16_*`): K pads to a multiple of 32, N to a multiple of 32 (two panels per tile
//   block). Panel p holds 16 * Kp BF16 at element 16 * Kp * p; inside it, k-pair r (k = 2r,
//   2r + 1) takes 32 elements: column j's two weights at 32 r + 2 j + (k % 2). This is the
//   operand order of TDPBF16PS and of AVX512-BF16's vdpbf16ps. Sums are F32.
//
// int8 per column (`int8c_*`): symmetric int8, one F32 scale per output column over the whole
//   of K, so a product sums all K byte products exactly in int32 before one multiply by the
//   scales (per-32 groups, int8.hpp, would stop the tile accumulation every 32 k). K pads to a
//   multiple of 64, N to a multiple of 32. Panel p at byte 16 * Kp * p; k4 block b (k = 4b ..
//   4b + 3) takes 64 bytes: column j's weights at 64 b + 4 j + (k % 4). After the Kp * Np
//   bytes come Np F32 scales and Np int32 column sums (the VNNI GEMV's unsigned-offset
//   correction). Activations are quantized per row: x[t][k] ~ xq[t][k] * xs[t], with
//   xs = max |x[t]| / 127; then
//     y[t][n] = fma(float(sum_k xq[t][k] q[k][n]), xs[t] * scale[n], bias[n]),
//   the same bits from AMX, from the VNNI GEMV and from the plain reference, since the int32
//   sum is exact whatever the order.
//
// The tiles run on the amx instruction set (cpu_features.hpp: AMX-TILE/INT8/BF16 in CPUID, the
// tile state in XCR0, and Linux's permission for its 8 KiB, asked once by amx::available, the
// kernel table's hook). On the avx512 set, and on the amx set below kAmxMinRows rows of int8,
// the products run on the GEMVs (AVX512-BF16 / AVX512-VNNI). Each tile product loads the tile
// configuration on its thread when it starts and releases the tiles when it ends (LDTILECFG /
// TILERELEASE), so an idle thread holds no tile state.
#pragma once

#include <cstdint>

#include "kernels/gemm.hpp"

namespace kael::kernels {

// ValueError unless --dtype bf16 can run: AVX512-BF16 on this CPU and the avx512 or amx set.
void require_bf16();
// Whether int8 weights take the per-column format below rather than int8.hpp's per-32 one:
// on the amx set (with AVX512-VNNI for the few-row GEMV; KAEL_VNNI=0 hides it).
bool int8_per_column();
// Rows from which an int8 product goes to the tiles; below, the VNNI GEMV (equal bits, and
// faster at decode). BF16 takes the tiles for any row count: the vdpbf16ps GEMV rounds its
// sums differently, and a row's result must not depend on the rows beside it.
inline constexpr std::int64_t kAmxMinRows = 16;

constexpr std::int64_t round_up(std::int64_t x, std::int64_t m) { return (x + m - 1) / m * m; }

// --- BF16 ---------------------------------------------------------------------------------
constexpr std::int64_t bf16_padded_k(std::int64_t K) { return round_up(K, 32); }
constexpr std::int64_t bf16_padded_n(std::int64_t N) { return round_up(N, 32); }
constexpr std::int64_t bf16_matrix_elements(std::int64_t K, std::int64_t N) {
  return bf16_padded_k(K) * bf16_padded_n(N);
}
// dst (bf16_matrix_elements) from element (k, n) of src: src[k * N + n], or src[n * K + k]
// with `transposed`; round to nearest even (core's converter). Threaded, on gemm_bf16's
// AVX-512 packer where the kernel table has it (equal bits to ref::convert_bf16_tiles).
void convert_bf16_tiles(std::uint16_t* dst, const float* src, std::int64_t K, std::int64_t N, bool transposed);
float bf16_tile_weight(const std::uint16_t* w, std::int64_t K, std::int64_t k, std::int64_t n);
// out (T, N) = epilogue(bf16(x) (T, K) @ W + bias), F32 sums. ValueError as require_bf16().
void bf16_linear(float* out, const float* x, const std::uint16_t* w, const float* bias, std::int64_t T,
                 std::int64_t K, std::int64_t N, Epilogue epilogue = Epilogue::store);

// --- int8 per column ----------------------------------------------------------------------
constexpr std::int64_t int8c_padded_k(std::int64_t K) { return round_up(K, 64); }
constexpr std::int64_t int8c_padded_n(std::int64_t N) { return round_up(N, 32); }
constexpr std::int64_t int8c_matrix_bytes(std::int64_t K, std::int64_t N) {
  return int8c_padded_k(K) * int8c_padded_n(N) + 8 * int8c_padded_n(N);
}
// dst (int8c_matrix_bytes, 4-byte aligned) from element (k, n) of src (as convert_bf16_tiles).
// scale = max |w| / 127 per column; ValueError naming (k, n) when a weight is not finite.
void quantize_int8c(std::uint8_t* dst, const float* src, std::int64_t K, std::int64_t N, bool transposed);
float int8c_weight(const std::uint8_t* w, std::int64_t K, std::int64_t N, std::int64_t k, std::int64_t n);
// out (T, N) = epilogue(x @ W + bias) as in the header comment. ValueError unless
// int8_per_column().
void int8c_linear(float* out, const float* x, const std::uint8_t* w, const float* bias, std::int64_t T,
                  std::int64_t K, std::int64_t N, Epilogue epilogue = Epilogue::store);
// xq (T, Kp) and xs (T) from x (T, K), per row; a row holding an infinity or NaN gets scale NaN.
// Plain C++: the reference for the kernel table's int8c_quantize_rows.
void quantize_rows_int8c(std::int8_t* xq, float* xs, const float* x, std::int64_t T, std::int64_t K);

// The plain references: the same roundings, then sums in double (bf16) or exact int (int8c).
namespace ref {
void convert_bf16_tiles(std::uint16_t* dst, const float* src, std::int64_t K, std::int64_t N, bool transposed);
void bf16_linear(float* out, const float* x, const std::uint16_t* w, const float* bias, std::int64_t T,
                 std::int64_t K, std::int64_t N, Epilogue epilogue = Epilogue::store);
void int8c_linear(float* out, const float* x, const std::uint8_t* w, const float* bias, std::int64_t T,
                  std::int64_t K, std::int64_t N, Epilogue epilogue = Epilogue::store);
}  // namespace ref

// The kernels behind the two linear functions are kernel table entries (kernel_table.hpp:
// gemm_bf16 and the bf16_pack_* conversions, int8c_*), single-threaded, the tile products in
// kernels/targets/amx/ and the GEMVs and conversions in kernels/targets/avx512/. Their activations hold each
// row as 64-byte chunks (64 int8 or 32 BF16 of K): row major for the GEMVs; `tiled` for the
// tile kernels: rows in groups of 16, each group's chunk c one contiguous A tile (16 rows x 64
// bytes) at byte 16 * Kp_bytes * group + 1024 * c, so that a tile load reads 1 KiB in a row
// instead of 16 lines a row apart. Rows from a multiple of 16 on can be converted apart (the
// drivers split them among the threads). Keep a and w on cache lines (AlignedVector, core's
// tensors): a tile row that spans two lines costs the tile kernels about a quarter of their
// speed (bench/amx_speed; docs/performance.md, "The measurements behind the code's constants").
namespace amx {
constexpr std::int64_t chunk_byte(std::int64_t row, std::int64_t chunk, std::int64_t row_bytes, bool tiled) {
  return tiled ? row / 16 * 16 * row_bytes + chunk * 1024 + row % 16 * 64 : row * row_bytes + chunk * 64;
}
}  // namespace amx

}  // namespace kael::kernels
