// Matrix products on weights laid out for the kernels at load ("packed"), and the strided
// products attention is made of. Plain functions on raw pointers: outputs, inputs, sizes.
//
// Packed layout of a weight W (K, N) (input-major, as GPT-2's Conv1D stores it): the columns
// are cut into panels of kPanel = 16 (the last one may be narrower, w = N - 16p); panel p
// holds rows k = 0..K-1 of its w columns contiguously, at offset 16 * p * K. The packed
// weight has exactly K * N floats. A thread that owns a range of panels reads one contiguous
// stretch of memory, which is what lets decode run at the memory bandwidth, and the GEMM
// micro-kernel reads its 16-wide rows from consecutive cache lines.
#pragma once

#include <cstdint>

namespace kael::kernels {

inline constexpr std::int64_t kPanel = 16;

// What a linear layer does with (inp @ W + bias) before it reaches memory. Fusing saves a
// pass over the output: the GELU of the MLP and the residual add after each projection.
enum class Epilogue {
  store,     // out = y
  gelu,      // out = gelu_new(y)
  residual,  // out += y (out holds the residual stream)
};

// The fewest 16-column panels of an F32 (K, N) weight that a thread's share of an M-row product
// holds (thread_pool.hpp's min_product_items_per_thread): the one split rule of the F32 products.
std::int64_t min_panels_per_thread(std::int64_t M, std::int64_t K);

// dst (K * N floats, packed as above) from src (K, N) row-major. dst must not overlap src.
void pack_panels(float* dst, const float* src, std::int64_t K, std::int64_t N);

// The packed form of W = src^T for src (N, K) row-major: the output head, stored as wte
// (vocab, C). Panel p is the transpose of src rows 16p.., which occupy exactly the memory the
// panel does, so dst may equal src (packed in place, through 16 K floats of scratch).
void pack_panels_transposed(float* dst, const float* src, std::int64_t K, std::int64_t N);

// out (T, N) = epilogue(inp (T, K) @ W + bias) for a packed W; bias (N) may be null. Each output
// is the products summed in input order, then the bias, so a row's result does not depend on T
// or on the thread count. Threaded over panels.
void linear_packed(float* out, const float* inp, const float* packed, const float* bias, std::int64_t T,
                   std::int64_t K, std::int64_t N, Epilogue epilogue = Epilogue::store);

// A (K, N) matrix in 16-column panels, as the micro-kernels read it: panel p starts at
// data + p * panel_stride, its rows ldb floats apart; with `packed`, the narrower last panel's
// rows are its width apart instead (the exact-size layout above). The KV cache is kept in
// this form with ldb = 16 (attention.hpp).
struct PanelView {
  const float* data;
  std::int64_t ldb;
  std::int64_t panel_stride;
  bool packed;
};

// Single-threaded: out (M, N; ldo) = a (M, K; lda) @ b.
void gemm_view(float* out, std::int64_t ldo, const float* a, std::int64_t lda, const PanelView& b, std::int64_t M,
               std::int64_t N, std::int64_t K);

// Single-threaded product with a packed b (K, N): out (M, N; ldo) = a (M, K; lda) @ b. The
// pieces of attention, whose keys and values are packed per head on the fly.
void gemm_packed(float* out, std::int64_t ldo, const float* a, std::int64_t lda, const float* packed, std::int64_t M,
                 std::int64_t N, std::int64_t K);

// Single-threaded strided products.
// out (M, N; row stride ldo) = scale * a (M, K; lda) @ b^T, b (N, K; ldb).
void gemm_nt(float* out, std::int64_t ldo, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
             std::int64_t M, std::int64_t N, std::int64_t K, float scale);
// out (M, N; ldo) = a (M, K; lda) @ b (K, N; ldb).
void gemm_nn(float* out, std::int64_t ldo, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
             std::int64_t M, std::int64_t N, std::int64_t K);
// c (M, N; ldc) = a^T @ b, or c += a^T @ b with `accumulate`, for a (K, M; lda) and b (K, N;
// ldb): equal bits to gemm_nn on a's transposed copy (then added to c). a is read in place where
// the table can (gemm_panels_at), else copied into rows. Attention's backward: dV += P^T dY and
// dK += dS^T Q, a block of P's rows at a time.
void gemm_tn(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
             std::int64_t M, std::int64_t N, std::int64_t K, bool accumulate = false);

// The general product, threaded: c (M, N; ldc) = op(a) @ op(b), or c += op(a) @ op(b) with
// `accumulate`. op(a) is a (M, K; lda), or with trans_a the transpose of a (K, M; lda); op(b) is
// b (K, N; ldb), or with trans_b the transpose of b (N, K; ldb). Each output is one chain over
// k in order (then added to c), whatever the thread count. One row with trans_b (a batch-1
// linear on an (out, in) weight) reads b in place through the table's GEMV, with the same bits. Training's products are this:
// dW = X^T dY is gemm(dW, X, trans_a = true, dY, accumulate = true), dX = dY W^T is
// gemm(dX, dY, W, trans_b = true). A bias (N), where given, is added to each row's sums as they
// leave the accumulators (c = sum + bias, or c += sum + bias; a linear layer's forward): the
// bits of adding it in a pass of its own, without that pass.
void gemm(float* c, std::int64_t ldc, const float* a, std::int64_t lda, bool trans_a, const float* b,
          std::int64_t ldb, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, bool accumulate = false,
          const float* bias = nullptr);

namespace ref {
// The general product in double (plus the bias, if any).
void gemm(float* c, std::int64_t ldc, const float* a, std::int64_t lda, bool trans_a, const float* b,
          std::int64_t ldb, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, bool accumulate = false,
          const float* bias = nullptr);
// Unpacks and multiplies in double: the reference for linear_packed.
void linear_packed(float* out, const float* inp, const float* packed, const float* bias, std::int64_t T,
                   std::int64_t K, std::int64_t N, Epilogue epilogue = Epilogue::store);
void gemm_nt(float* out, std::int64_t ldo, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
             std::int64_t M, std::int64_t N, std::int64_t K, float scale);
void gemm_nn(float* out, std::int64_t ldo, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
             std::int64_t M, std::int64_t N, std::int64_t K);
void gemm_tn(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
             std::int64_t M, std::int64_t N, std::int64_t K, bool accumulate = false);
}  // namespace ref

}  // namespace kael::kernels
