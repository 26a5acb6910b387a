// The general product of gemm.hpp with BF16 operands: what PyTorch's CPU autocast does to a
// matrix product in mixed-precision training. Each operand is rounded to BF16 (round to
// nearest even, core's f32_to_bf16), the products are summed in F32 (in the AMX tiles, or by
// AVX512-BF16's vdpbf16ps, both of which read a subnormal BF16 as zero), and c is F32.
//
// Each call converts op(a) and op(b) once (O(M K + K N) against the O(M N K) product), into
// the layouts of amx.hpp: op(a) as rows of 32-element (64-byte) K chunks, padded with zeros to
// round_up(M, 32) rows and round_up(K, 32) columns, tiled in groups of 16 rows for the tiles
// (amx::chunk_byte); op(b) as BF16 panels of 16 columns in the VNNI pair order, padded to
// round_up(N, 32) columns (amx.hpp's BF16 weight format, read from any stride or transposed).
#pragma once

#include <cstdint>
#include <string>

namespace kael::kernels {

// Whether gemm_bf16 can run on the active set: AVX512-BF16 (and the avx512 or amx set), with
// the AMX-BF16 tiles on the amx set. When not, *why (if given) says what is missing.
bool gemm_bf16_available(std::string* why = nullptr);
// ValueError naming what is missing unless gemm_bf16_available().
void require_gemm_bf16();
// What runs the product on the active set: "amx-bf16", "avx512-bf16" or "none".
const char* gemm_bf16_kind();

// c (M, N; ldc) = op(a) @ op(b), or c += with `accumulate`, with the arguments of
// kernels::gemm; F32 in and out, BF16 products summed in F32. A bias (N; F32, not rounded),
// where given, is added to each row's sums as they leave the accumulators (c = sum + bias, or
// c += sum + bias): no pass that fills c with it first. Threaded (over 32-column blocks,
// or over rows when the columns are few); each output is one sum over k in order whatever the
// thread count, so results do not depend on it. ValueError as require_gemm_bf16().
void gemm_bf16(float* c, std::int64_t ldc, const float* a, std::int64_t lda, bool trans_a, const float* b,
               std::int64_t ldb, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
               bool accumulate = false, const float* bias = nullptr);

// op(b) (K, N) converted once, for several products that share it: dst holds
// bf16_operand_elements(N, K) BF16 in the layout above (threaded). gemm_bf16_packed then runs
// gemm_bf16 with that op(b), equal bits to gemm_bf16 on the same b. With column_sums (N; only
// without trans_b, else ValueError), column_sums[n] += op(b)[k][n] for k in order, in F32, from
// the same read of b (a bias gradient beside its weight gradient); each column is summed by one
// thread, so the sums do not depend on the thread count.
std::int64_t bf16_operand_elements(std::int64_t N, std::int64_t K);
void pack_bf16_operand(std::uint16_t* dst, const float* b, std::int64_t ldb, bool trans_b, std::int64_t N,
                       std::int64_t K, float* column_sums = nullptr);
void gemm_bf16_packed(float* c, std::int64_t ldc, const float* a, std::int64_t lda, bool trans_a,
                      const std::uint16_t* b16, std::int64_t M, std::int64_t N, std::int64_t K,
                      bool accumulate = false, const float* bias = nullptr);

// x (M, N) converted once into both layouts that a linear layer's backward reads it in (dout:
// op(a) of dX = dout @ W^T, op(b) of dW = inp^T @ dout), from one read of x: rows16 holds
// bf16_rows_elements(M, N) BF16, op(a) = x for gemm_bf16_prepacked; panels16 holds
// bf16_operand_elements(N, M), op(b) = x, as pack_bf16_operand(panels16, x, ldx, false, N, M,
// column_sums) writes it (column sums alike). Equal bits to converting each apart. Threaded.
std::int64_t bf16_rows_elements(std::int64_t M, std::int64_t K);
void pack_bf16_both(std::uint16_t* rows16, std::uint16_t* panels16, const float* x, std::int64_t ldx, std::int64_t M,
                    std::int64_t N, float* column_sums = nullptr);
// c (M, N) = or += op(a) @ op(b) (+ bias) with both operands converted: a16 by pack_bf16_both's
// rows (M, K), b16 by pack_bf16_operand (K, N).
void gemm_bf16_prepacked(float* c, std::int64_t ldc, const std::uint16_t* a16, const std::uint16_t* b16,
                         std::int64_t M, std::int64_t N, std::int64_t K, bool accumulate = false,
                         const float* bias = nullptr);

namespace ref {
// The same operands rounded with core's f32_to_bf16, their products summed in double, then
// rounded once to F32, the bias added in F32 (and added to c with `accumulate`). Runs on any CPU.
void gemm_bf16(float* c, std::int64_t ldc, const float* a, std::int64_t lda, bool trans_a, const float* b,
               std::int64_t ldb, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
               bool accumulate = false, const float* bias = nullptr);
}  // namespace ref

}  // namespace kael::kernels
