#include "train/precision.hpp"

#include <string_view>

#include "kael/core/error.hpp"
#include "kernels/gemm.hpp"
#include "kernels/gemm_bf16.hpp"

namespace kael::train {
namespace {
thread_local Precision t_precision = Precision::f32;
}  // namespace

Precision parse_precision(std::string_view name) {
  if (name == "f32") return Precision::f32;
  if (name == "bf16") return Precision::bf16;
  throw ValueError(str("precision '", name, "' is not one kael trains at (expected f32 or bf16)"));
}

const char* precision_name(Precision precision) { return precision == Precision::bf16 ? "bf16" : "f32"; }

void require_precision(Precision precision) {
  if (precision != Precision::bf16) return;
  std::string why;
  if (!kernels::gemm_bf16_available(&why))
    throw ValueError(str("precision bf16 needs a CPU with AMX-BF16 or AVX512-BF16 for its matrix products: ", why,
                         " (train at --precision f32 instead)"));
}

PrecisionScope::PrecisionScope(Precision precision) : saved_(t_precision) { t_precision = precision; }
PrecisionScope::~PrecisionScope() { t_precision = saved_; }

Precision current_precision() { return t_precision; }

void product(float* c, std::int64_t ldc, const float* a, std::int64_t lda, bool trans_a, const float* b,
             std::int64_t ldb, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, bool accumulate) {
  if (t_precision == Precision::bf16)
    kernels::gemm_bf16(c, ldc, a, lda, trans_a, b, ldb, trans_b, M, N, K, accumulate);
  else
    kernels::gemm(c, ldc, a, lda, trans_a, b, ldb, trans_b, M, N, K, accumulate);
}

}  // namespace kael::train
