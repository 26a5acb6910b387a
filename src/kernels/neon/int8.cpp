// The NEON int8 GEMM of int8.hpp with widening multiplies (int8_gemm.hpp): any ARMv8-A CPU.
#include "kernels/neon/int8_gemm.hpp"

namespace kael::kernels::neon {

void int8_gemm(float* c, std::int64_t ldc, const std::int8_t* xq, const float* xs, std::int64_t M, std::int64_t Kp,
               const std::int8_t* w, const std::uint16_t* scales, std::int64_t panels, std::int64_t n_valid,
               const float* bias, Epilogue epilogue) {
  gemm<false>(c, ldc, xq, xs, M, Kp, w, scales, panels, n_valid, bias, epilogue);
}

}  // namespace kael::kernels::neon
