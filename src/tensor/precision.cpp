// set_float32_matmul_precision and the product it selects (tensor/f32_product.hpp).
#include <atomic>

#include "kael/core/error.hpp"
#include "kael/tensor/precision.hpp"
#include "kernels/gemm.hpp"
#include "kernels/gemm_bf16.hpp"
#include "tensor/f32_product.hpp"

namespace kael {

namespace {

enum class MatmulPrecision { highest, high, medium };

// Relaxed is enough: the setting orders nothing else, and each product reads it once.
std::atomic<MatmulPrecision> g_precision{MatmulPrecision::highest};

}  // namespace

void set_float32_matmul_precision(std::string_view precision) {
  MatmulPrecision p;
  if (precision == "highest")
    p = MatmulPrecision::highest;
  else if (precision == "high")
    p = MatmulPrecision::high;
  else if (precision == "medium")
    p = MatmulPrecision::medium;
  else
    throw ValueError(str("set_float32_matmul_precision: precision '", precision,
                         "' is not one of \"highest\", \"high\" or \"medium\""));
  g_precision.store(p, std::memory_order_relaxed);
}

std::string get_float32_matmul_precision() {
  switch (g_precision.load(std::memory_order_relaxed)) {
    case MatmulPrecision::high: return "high";
    case MatmulPrecision::medium: return "medium";
    case MatmulPrecision::highest: break;
  }
  return "highest";
}

bool tensor_detail::bf16_products() {
  return g_precision.load(std::memory_order_relaxed) == MatmulPrecision::medium && kernels::gemm_bf16_available();
}

void tensor_detail::f32_product(float* c, std::int64_t ldc, const float* a, std::int64_t lda, bool trans_a,
                                const float* b, std::int64_t ldb, bool trans_b, std::int64_t M, std::int64_t N,
                                std::int64_t K, const float* bias) {
  if (bf16_products())
    kernels::gemm_bf16(c, ldc, a, lda, trans_a, b, ldb, trans_b, M, N, K, /*accumulate=*/false, bias);
  else
    kernels::gemm(c, ldc, a, lda, trans_a, b, ldb, trans_b, M, N, K, /*accumulate=*/false, bias);
}

}  // namespace kael
