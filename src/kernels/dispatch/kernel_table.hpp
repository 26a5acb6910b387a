// The kernels of one instruction set, as a table of function pointers. One table per set is
// built once, at start-up or on the first call, from the units of that set (kernels/targets/:
// portable/; avx2/, avx512/, amx/ on x86 and neon/ on ARM64, each compiled with its own flags),
// and the dispatching functions of gemm.hpp, quant.hpp, int8.hpp, norm.hpp and elementwise.hpp
// call through active_kernels(). They split the work across threads; no table kernel starts one.
//
// Each set's fill() starts from the table of the set it builds on (base_isa) and replaces what it does
// better, so a set may leave an entry to a narrower one (AVX-512 without VNNI keeps AVX2's
// int8 kernel). Results may differ between sets in the last bits, never within one: every
// entry computes each output the same way whatever the row count, the thread split or the
// call (so forward_batch equals forward bit for bit on every set).
//
// Declarations only: an inline function defined in a header and compiled in an AVX unit
// could be picked by the linker for baseline callers and crash a CPU without that unit's ISA.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/dispatch/cpu_features.hpp"
#include "kernels/gemm.hpp"
#include "kernels/training.hpp"

namespace kael::kernels {

// The kernel types, one per table entry; each set declares its kernels with them
// (`GemmPanelsFn gemm_panels;` declares a function of that type).
//
// F32 GEMM over 16-column panels (gemm.hpp): panels [0, ceil(N / 16)) of b, panel p at
// b + p * panel_stride with rows ldb floats apart, except that with `packed` the narrower
// last panel's rows are its width apart. c (M, N; ldc) = epilogue(a (M, K; lda) @ b + bias);
// bias (N) may be null. Every output is one FMA chain over k in order, then + bias.
using GemmPanelsFn = void(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const float* b,
                          std::int64_t ldb, std::int64_t panel_stride, bool packed, std::int64_t M, std::int64_t N,
                          std::int64_t K, const float* bias, Epilogue epilogue);
// As GemmPanelsFn with a transposed: op(a) (M, K) is a (K, M; lda), input (r, k) at a[k * lda + r]
// (kernels::gemm's trans_a, dW = X^T dY in training), read without a transposed copy; M >= 3
// (a partial last panel too). Equal bits to GemmPanelsFn on the transposed copy.
using GemmPanelsAtFn = GemmPanelsFn;
// panel (K, w) = the transpose of src (w, K; rows ld apart), w <= 16: panel[k * w + r] =
// src[r * ld + k]. How kernels::gemm packs 16 rows of a torch-layout (out, in) weight, a linear's
// B, into one GEMM panel.
using TransposePanelFn = void(float* panel, const float* src, std::int64_t ld, std::int64_t K, std::int64_t w);
// One row against a torch-layout weight, read in place: out (N) = epilogue(x (K) @ w^T + bias) for
// w (N, K; rows ldw apart), bias (N) may be null. Equal bits to GemmPanelsFn with M = 1 on the
// packed w^T (kernels::gemm's M = 1, trans_b product, a batch-1 tensor linear). Single-threaded.
using GemvRowsFn = void(float* out, const float* x, const float* w, std::int64_t ldw, std::int64_t N, std::int64_t K,
                        const float* bias, Epilogue epilogue);
// As kernels::gemm_nt (single-threaded).
using GemmNtFn = void(float* out, std::int64_t ldo, const float* a, std::int64_t lda, const float* b,
                      std::int64_t ldb, std::int64_t M, std::int64_t N, std::int64_t K, float scale);
// F16 weights (quant.hpp). dst (K, w) F32 = one F16 panel (K, w).
using DequantizeF16Fn = void(float* dst, const std::uint16_t* panel, std::int64_t K, std::int64_t w);
// c (M, 16 panels; ldc) = epilogue(a (M, K; lda) @ `panels` full F16 panels at b + bias), any M,
// converting in registers; equal bits to DequantizeF16Fn + GemmPanelsFn.
using F16GemmFn = void(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const std::uint16_t* b,
                       std::int64_t M, std::int64_t panels, std::int64_t K, const float* bias, Epilogue epilogue);
// int8 (int8.hpp): the activation quantizer, equal bits on every set, and the GEMM over panels
// [0, panels) of w, at most n_valid columns (the matrix's N, counted from panel 0).
using QuantizeRowsFn = void(std::int8_t* xq, float* xs, const float* x, std::int64_t T, std::int64_t K);
using Int8GemmFn = void(float* c, std::int64_t ldc, const std::int8_t* xq, const float* xs, std::int64_t M,
                        std::int64_t Kp, const std::int8_t* w, const std::uint16_t* scales, std::int64_t panels,
                        std::int64_t n_valid, const float* bias, Epilogue epilogue);
// Causal attention of one head (attention.hpp) over its cache in blocks of block_positions (a
// multiple of 16), block b's keys at key_blocks[b] and values at value_blocks[b] in the layout
// of attention.hpp, already holding the T new positions: out rows t (T, head_dim; out_stride)
// for the query rows q (T, head_dim; q_stride) at positions pos0 + t. Each row equal, bit for
// bit, to the same row computed alone (T = 1), whatever the block size. Single-threaded.
using AttendHeadFn = void(float* out, std::int64_t out_stride, const float* q, std::int64_t q_stride,
                          const float* const* key_blocks, const float* const* value_blocks,
                          std::int64_t block_positions, std::int64_t T, std::int64_t pos0, std::int64_t head_dim);
// One query row q (heads, head_dim) at position pos over `heads` consecutive heads of a block
// table: head i's keys at key_blocks[b] + i * head_floats, its values likewise. out (heads,
// head_dim), each head equal, bit for bit, to AttendHeadFn with T = 1. Single-threaded.
using AttendRowFn = void(float* out, const float* q, const float* const* key_blocks, const float* const* value_blocks,
                         std::int64_t head_floats, std::int64_t heads, std::int64_t block_positions, std::int64_t pos,
                         std::int64_t head_dim);
// Rows (norm.hpp, elementwise.hpp): out (n) = f(inp); out may equal inp.
using RowFn = void(float* out, const float* inp, std::int64_t n);
// sum.hpp: the sum of x (n) in double, lanes as described there.
using SumFn = double(const float* x, std::int64_t n);
// out (C) = layer_norm of one row x (C), its mean and rstd saved where not null (norm.hpp).
using LayerNormRowFn = void(float* out, float* mean, float* rstd, const float* x, const float* weight,
                            const float* bias, std::int64_t C, float eps);
// Training (training.hpp), single-threaded, with the meanings given there.
using GeluBackwardFn = void(float* dinp, const float* inp, const float* dout, std::int64_t n);
using AdamWUpdateFn = void(float* param, float* m, float* v, const float* grad, std::int64_t n,
                           const AdamWScalars& scalars);
using SumOfSquaresFn = double(const float* x, std::int64_t n);  // one block, lanes as described there
// The BF16 general product (gemm_bf16.hpp), in its layouts. Row groups [g0, g1) of 16 rows of
// the converted op(a) (Kp = round_up(K, 32) BF16 a row; rows past M zero), `tiled` or row major;
// panels [p0, p1) of the converted op(b) (columns past N zero). trans as in kernels::gemm.
using Bf16PackRowsFn = void(std::uint16_t* dst, const float* a, std::int64_t lda, bool trans, std::int64_t M,
                            std::int64_t K, std::int64_t g0, std::int64_t g1, bool tiled);
using Bf16PackPanelsFn = void(std::uint16_t* dst, const float* b, std::int64_t ldb, bool trans, std::int64_t N,
                              std::int64_t K, std::int64_t p0, std::int64_t p1);
// The same panels of op(b) = b (not transposed), and column_sums[n] += b[k][n] over k in order
// for the panels' columns: one read of b for the BF16 product and an F32 column sum beside it
// (a linear layer's bias gradient beside its weight gradient's op(b)).
using Bf16PackPanelsSumsFn = void(std::uint16_t* dst, float* column_sums, const float* b, std::int64_t ldb,
                                  std::int64_t N, std::int64_t K, std::int64_t p0, std::int64_t p1);
// x (M, N) in both layouts from one read, for 32-column chunks [c0, c1): rows as op(a) = x
// (Kp = round_up(N, 32) a row, rows up to round_up(M, 32), `tiled` or row major) and panels as
// op(b) = x (K = M), with column_sums (may be null) as Bf16PackPanelsSumsFn's. A gradient that
// is op(a) of one product of a linear layer's backward and op(b) of the other.
using Bf16PackBothFn = void(std::uint16_t* rows, std::uint16_t* panels, float* column_sums, const float* x,
                            std::int64_t ldx, std::int64_t M, std::int64_t N, std::int64_t c0, std::int64_t c1,
                            bool tiled);
// c (M, `blocks` 32-column blocks, at most n_valid columns; ldc) = epilogue(a @ b + bias, the
// blocks' n_valid entries of bias where not null), a converted rows from row 0 (M of them, in
// the layout gemm_bf16_tiled names), b the blocks' panels. The tile kernels load and release
// the tile configuration themselves (amx.hpp).
using Bf16GemmFn = void(float* c, std::int64_t ldc, const std::uint16_t* a, std::int64_t M, std::int64_t Kp,
                        const std::uint16_t* b, std::int64_t blocks, std::int64_t n_valid, const float* bias,
                        Epilogue epilogue);
// amx.hpp's per-column int8: xq (T rows of Kp, `tiled` or row major as amx::chunk_byte) and xs
// (T) from x (T, K), equal bits to kernels::quantize_rows_int8c; and the product of the
// quantized rows with `blocks` 32-column blocks of the matrix from its column 0 (scales and
// sums its F32 scales and int32 column sums from there), as Bf16GemmFn. The tile product reads
// tiled rows and ignores the sums; the GEMV reads row-major ones.
using Int8cQuantizeRowsFn = void(std::int8_t* xq, float* xs, const float* x, std::int64_t T, std::int64_t K,
                                 std::int64_t Kp, bool tiled);
using Int8cGemmFn = void(float* c, std::int64_t ldc, const std::int8_t* a, const float* xs, std::int64_t M,
                         std::int64_t Kp, const std::int8_t* w, const float* scales, const std::int32_t* sums,
                         std::int64_t blocks, std::int64_t n_valid, const float* bias, Epilogue epilogue);

struct KernelTable {
  Isa isa = Isa::scalar;
  // The int8 byte dot product in use: "scalar", "pmaddubsw", "avx-vnni", "avx512-vnni", "neon-sdot",
  // "neon-smull", ...
  const char* int8_dot = "scalar";
  GemmPanelsFn* gemm_panels = nullptr;
  GemmPanelsAtFn* gemm_panels_at = nullptr;  // null: kernels::gemm copies a transposed A into rows
  GemmNtFn* gemm_nt = nullptr;
  GemvRowsFn* gemv_rows = nullptr;  // null: kernels::gemm packs the transposed weight
  TransposePanelFn* transpose_panel = nullptr;  // null: kernels::gemm copies element by element
  DequantizeF16Fn* dequantize_f16_panel = nullptr;
  F16GemmFn* f16_gemm = nullptr;  // null: linear_matrix dequantizes instead
  // The most rows f16_gemm is used for: where the set's tiles convert each weight once per tile
  // and do not block for the caches, more rows than one tile covers would convert every weight
  // again for each tile, and linear_matrix's dequantized panels are faster.
  std::int64_t f16_gemm_rows = 0;
  QuantizeRowsFn* quantize_rows = nullptr;
  Int8GemmFn* int8_gemm = nullptr;
  AttendHeadFn* attend_head = nullptr;  // null: attention.cpp's two products per head
  AttendRowFn* attend_row = nullptr;    // set wherever attend_head is
  RowFn* softmax = nullptr;
  RowFn* gelu_new = nullptr;
  RowFn* exp = nullptr;  // exp.hpp: the C library's e^x, NaN and infinities included
  RowFn* sigmoid = nullptr;  // exp.hpp, on that exp
  RowFn* tanh = nullptr;     // exp.hpp, on that exp
  SumFn* sum = nullptr;      // sum.hpp
  LayerNormRowFn* layer_norm_row = nullptr;
  GeluBackwardFn* gelu_backward = nullptr;
  RowFn* gelu_erf = nullptr;                      // null: elementwise.cpp's loops on the table's exp
  GeluBackwardFn* gelu_erf_backward = nullptr;    // (family/gelu_erf.hpp, either way)
  AdamWUpdateFn* adamw_update = nullptr;
  SumOfSquaresFn* sum_of_squares = nullptr;
  // BF16 general product: null where the set or CPU has no BF16 dot product.
  const char* gemm_bf16_kind = "none";
  Bf16PackRowsFn* bf16_pack_rows = nullptr;
  Bf16PackPanelsFn* bf16_pack_panels = nullptr;
  Bf16PackPanelsSumsFn* bf16_pack_panels_sums = nullptr;
  Bf16PackBothFn* bf16_pack_both = nullptr;
  Bf16GemmFn* gemm_bf16 = nullptr;
  bool gemm_bf16_tiled = false;  // the layout of a that gemm_bf16 reads
  // Per-column int8 (amx.hpp): null but on the sets with AVX512-VNNI; the tile product only
  // on the amx set, for kAmxMinRows rows or more.
  Int8cQuantizeRowsFn* int8c_quantize_rows = nullptr;
  Int8cGemmFn* int8c_gemv = nullptr;
  Int8cGemmFn* int8c_tile_gemm = nullptr;
};

// The table of the active set (active_isa()).
const KernelTable& active_kernels();

// The table of `isa`, built on first use. ValueError when isa_supported(isa) is false.
const KernelTable& kernels_for(Isa isa);

// The fill functions, one per set, each defined in that set's units.
namespace portable {
void fill(KernelTable& table);
}
#if KAEL_X86_KERNELS
namespace avx2 {
void fill(KernelTable& table, const CpuFeatures& cpu);
}
namespace avx512 {
void fill(KernelTable& table, const CpuFeatures& cpu);
}
#endif
// The AMX hook: a build with sources in src/kernels/targets/amx/ defines KAEL_AMX_KERNELS and these
// two. available() asks Linux for the tile state (and says why not when refused); fill() runs
// only after it succeeded, on top of the avx512 table: the tile products of amx.hpp's formats.
#if KAEL_AMX_KERNELS
namespace amx {
bool available(const CpuFeatures& cpu, std::string* why);
void fill(KernelTable& table, const CpuFeatures& cpu);
}  // namespace amx
#endif
#if KAEL_NEON_KERNELS
namespace neon {
void fill(KernelTable& table, const CpuFeatures& cpu);
}
#endif

}  // namespace kael::kernels
