// The precision the training products run at on the calling thread (kael/train/gpt2_train.hpp's
// Precision), set by TrainableGPT2 around each forward and backward pass, and the general
// product that follows it. A thread-local, so the products' signatures stay those of F32.
#pragma once

#include <cstdint>

#include "kael/train/gpt2_train.hpp"

namespace kael::train {

// Sets the calling thread's precision for its lifetime, then restores the one before.
class PrecisionScope {
 public:
  explicit PrecisionScope(Precision precision);
  ~PrecisionScope();
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  Precision saved_;
};

Precision current_precision();

// kernels::gemm (f32) or kernels::gemm_bf16 (bf16), same arguments, at current_precision().
void product(float* c, std::int64_t ldc, const float* a, std::int64_t lda, bool trans_a, const float* b,
             std::int64_t ldb, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, bool accumulate = false);

}  // namespace kael::train
