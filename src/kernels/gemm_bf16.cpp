// gemm_bf16.hpp: the conversions and the product split across threads, in baseline code, each
// piece on the active kernel table (kernel_table.hpp); the same driver runs amx.hpp's
// bf16_linear (inference) on the same kernels. And the plain reference.
#include "kernels/gemm_bf16.hpp"

#include <algorithm>
#include <vector>

#include "kael/core/dtype.hpp"
#include "kael/core/error.hpp"
#include "kernels/infra/aligned_vector.hpp"
#include "kernels/amx.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/dispatch/kernel_table.hpp"
#include "kernels/infra/thread_pool.hpp"

namespace kael::kernels {

bool gemm_bf16_available(std::string* why) {
  if (active_kernels().gemm_bf16 != nullptr) return true;
  if (why != nullptr) {
    const CpuFeatures& cpu = cpu_features();
    if (!cpu.avx512_bf16 && !cpu.amx_bf16)
      *why = "this CPU has neither AMX-BF16 nor AVX512-BF16";
    else if (active_isa() < Isa::avx512 || active_isa() > Isa::amx)
      *why = str("the ", isa_name(active_isa()), " kernel set is in use (KAEL_ISA), which has no BF16 product");
    else
      *why = "this build has no BF16 kernels (src/kernels/targets/amx/ is not built)";
  }
  return false;
}

void require_gemm_bf16() {
  std::string why;
  if (!gemm_bf16_available(&why)) throw ValueError(str("BF16 matrix products need AMX-BF16 or AVX512-BF16: ", why));
}

const char* gemm_bf16_kind() { return active_kernels().gemm_bf16_kind; }

std::int64_t bf16_operand_elements(std::int64_t N, std::int64_t K) {
  return bf16_padded_n(N) * bf16_padded_k(K);
}

void pack_bf16_operand(std::uint16_t* dst, const float* b, std::int64_t ldb, bool trans_b, std::int64_t N,
                       std::int64_t K, float* column_sums) {
  require_gemm_bf16();
  if (column_sums != nullptr && trans_b)
    throw ValueError("pack_bf16_operand: column sums are taken only from an op(b) that is not transposed");
  if (N <= 0 || K <= 0) return;
  const KernelTable& kt = active_kernels();
  const std::int64_t Kp = bf16_padded_k(K), Np = bf16_padded_n(N);
  parallel_for(Np / kPanel, min_items_per_thread(kPanel * Kp), [&](std::int64_t p0, std::int64_t p1) {
    if (column_sums != nullptr)
      kt.bf16_pack_panels_sums(dst, column_sums, b, ldb, N, K, p0, p1);
    else
      kt.bf16_pack_panels(dst, b, ldb, trans_b, N, K, p0, p1);
  });
}

namespace {

// Rows of a done per pass over a thread's blocks of b: 256 rows of K = 3072 BF16 are 1.5 MiB,
// which stays in L2 while the blocks of b stream past it.
constexpr std::int64_t kRowsPerPass = 256;

// c = epilogue(a16 @ b16 + bias) for K > 0, both converted; threaded. Every output is one sum
// over k in order whichever split runs it, so the bits depend on neither.
void product_of_converted(float* c, std::int64_t ldc, const std::uint16_t* a16, const std::uint16_t* b16,
                          std::int64_t M, std::int64_t N, std::int64_t K, const float* bias, Epilogue epilogue) {
  const KernelTable& kt = active_kernels();
  const std::int64_t Kp = bf16_padded_k(K), Mp = round_up(M, 32), Np = bf16_padded_n(N);
  const std::int64_t blocks = Np / 32;
  // rows from row r0 (a multiple of 32, so a tile group starts there in either layout).
  const auto run = [&](std::int64_t r0, std::int64_t rows, std::int64_t col, std::int64_t block_count) {
    for (std::int64_t m0 = r0; m0 < r0 + rows; m0 += kRowsPerPass)
      kt.gemm_bf16(c + m0 * ldc + col, ldc, a16 + m0 * Kp, std::min(kRowsPerPass, r0 + rows - m0), Kp,
                   b16 + col * Kp, block_count, N - col, bias ? bias + col : nullptr, epilogue);
  };
  if (blocks >= 2 * num_threads() || M < 64) {
    const std::int64_t min_blocks = min_product_items_per_thread(M * Kp * 32, Kp * 32 * 2);
    parallel_for(blocks, min_blocks, [&](std::int64_t first, std::int64_t last) {
      run(0, M, first * 32, last - first);
    });
  } else {
    // Few columns, many rows: threads take groups of 32 rows (whole tiles) instead.
    parallel_for(Mp / 32, min_items_per_thread(32 * Kp * Np), [&](std::int64_t first, std::int64_t last) {
      run(first * 32, std::min(M, last * 32) - first * 32, 0, blocks);
    });
  }
}

// c = epilogue(0 + bias): the product over an empty K.
void empty_product(float* c, std::int64_t ldc, std::int64_t M, std::int64_t N, const float* bias, Epilogue epilogue) {
  std::vector<float> y(static_cast<std::size_t>(N));
  for (std::int64_t i = 0; i < M; ++i) {
    for (std::int64_t j = 0; j < N; ++j) y[static_cast<std::size_t>(j)] = bias != nullptr ? 0.0f + bias[j] : 0.0f;
    if (epilogue == Epilogue::gelu) gelu_new(y.data(), y.data(), N);
    for (std::int64_t j = 0; j < N; ++j) {
      const float sum = y[static_cast<std::size_t>(j)];
      c[i * ldc + j] = epilogue == Epilogue::residual ? c[i * ldc + j] + sum : sum;
    }
  }
}

Epilogue epilogue_of(bool accumulate) { return accumulate ? Epilogue::residual : Epilogue::store; }

// gemm_bf16_packed with an epilogue: op(a) converted into the calling thread's buffer, then
// the product.
void convert_a_and_multiply(float* c, std::int64_t ldc, const float* a, std::int64_t lda, bool trans_a,
                            const std::uint16_t* b16, std::int64_t M, std::int64_t N, std::int64_t K, const float* bias,
                            Epilogue epilogue) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) return empty_product(c, ldc, M, N, bias, epilogue);
  const KernelTable& kt = active_kernels();
  const std::int64_t Kp = bf16_padded_k(K), Mp = round_up(M, 32);
  // The calling thread's buffer, filled and read by the workers through this pointer; every
  // element is written by the packing (the padding too), so it is not zeroed.
  thread_local ScratchVector<std::uint16_t> a_buffer;
  a_buffer.resize(static_cast<std::size_t>(Mp * Kp));
  std::uint16_t* a16 = a_buffer.data();
  parallel_for(Mp / 16, min_items_per_thread(16 * Kp), [&](std::int64_t g0, std::int64_t g1) {
    kt.bf16_pack_rows(a16, a, lda, trans_a, M, K, g0, g1, kt.gemm_bf16_tiled);
  });
  product_of_converted(c, ldc, a16, b16, M, N, K, bias, epilogue);
}

}  // namespace

void gemm_bf16_packed(float* c, std::int64_t ldc, const float* a, std::int64_t lda, bool trans_a,
                      const std::uint16_t* b16, std::int64_t M, std::int64_t N, std::int64_t K, bool accumulate,
                      const float* bias) {
  require_gemm_bf16();
  convert_a_and_multiply(c, ldc, a, lda, trans_a, b16, M, N, K, bias, epilogue_of(accumulate));
}

// amx.hpp's BF16 weights are op(b)'s layout, so a linear layer is this driver's product.
void bf16_linear(float* out, const float* x, const std::uint16_t* w, const float* bias, std::int64_t T,
                 std::int64_t K, std::int64_t N, Epilogue epilogue) {
  require_bf16();
  convert_a_and_multiply(out, N, x, K, false, w, T, N, K, bias, epilogue);
}

std::int64_t bf16_rows_elements(std::int64_t M, std::int64_t K) { return round_up(M, 32) * bf16_padded_k(K); }

void pack_bf16_both(std::uint16_t* rows16, std::uint16_t* panels16, const float* x, std::int64_t ldx, std::int64_t M,
                    std::int64_t N, float* column_sums) {
  require_gemm_bf16();
  if (M <= 0 || N <= 0) return;
  const KernelTable& kt = active_kernels();
  const std::int64_t Mp = round_up(M, 32);
  // Over 32-column chunks: each column (its sum too) is one thread's, every row of it.
  parallel_for(bf16_padded_n(N) / 32, min_items_per_thread(32 * Mp), [&](std::int64_t c0, std::int64_t c1) {
    kt.bf16_pack_both(rows16, panels16, column_sums, x, ldx, M, N, c0, c1, kt.gemm_bf16_tiled);
  });
}

void gemm_bf16_prepacked(float* c, std::int64_t ldc, const std::uint16_t* a16, const std::uint16_t* b16,
                         std::int64_t M, std::int64_t N, std::int64_t K, bool accumulate, const float* bias) {
  require_gemm_bf16();
  if (M <= 0 || N <= 0) return;
  if (K <= 0) return empty_product(c, ldc, M, N, bias, epilogue_of(accumulate));
  product_of_converted(c, ldc, a16, b16, M, N, K, bias, epilogue_of(accumulate));
}

void gemm_bf16(float* c, std::int64_t ldc, const float* a, std::int64_t lda, bool trans_a, const float* b,
               std::int64_t ldb, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, bool accumulate,
               const float* bias) {
  require_gemm_bf16();
  if (M <= 0 || N <= 0) return;
  // The calling thread's buffer for op(b), kept between calls; written whole by the packing.
  thread_local ScratchVector<std::uint16_t> b_buffer;
  b_buffer.resize(static_cast<std::size_t>(std::max<std::int64_t>(bf16_operand_elements(N, K), 0)));
  pack_bf16_operand(b_buffer.data(), b, ldb, trans_b, N, K);
  gemm_bf16_packed(c, ldc, a, lda, trans_a, b_buffer.data(), M, N, K, accumulate, bias);
}

namespace ref {

void gemm_bf16(float* c, std::int64_t ldc, const float* a, std::int64_t lda, bool trans_a, const float* b,
               std::int64_t ldb, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, bool accumulate,
               const float* bias) {
  const auto rounded = [](float x) { return static_cast<double>(bf16_to_f32(f32_to_bf16(x))); };
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      double sum = 0.0;
      for (std::int64_t k = 0; k < K; ++k) {
        const float x = trans_a ? a[k * lda + i] : a[i * lda + k];
        const float y = trans_b ? b[j * ldb + k] : b[k * ldb + j];
        sum += rounded(x) * rounded(y);
      }
      const float y = bias != nullptr ? static_cast<float>(sum) + bias[j] : static_cast<float>(sum);
      float& out = c[i * ldc + j];
      out = accumulate ? out + y : y;
    }
}

}  // namespace ref

}  // namespace kael::kernels
