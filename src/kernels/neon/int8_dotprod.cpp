// The NEON int8 GEMM of int8.hpp with SDOT (int8_gemm.hpp), compiled with
// -march=armv8.2-a+dotprod (src/CMakeLists.txt); the NEON table takes it only when the CPU
// reports the dot-product extension. The rest of kernels/neon stays baseline ARMv8-A.
#include "kernels/neon/int8_gemm.hpp"

namespace kael::kernels::neon {

void int8_gemm_sdot(float* c, std::int64_t ldc, const std::int8_t* xq, const float* xs, std::int64_t M,
                    std::int64_t Kp, const std::int8_t* w, const std::uint16_t* scales, std::int64_t panels,
                    std::int64_t n_valid, const float* bias, Epilogue epilogue) {
  gemm<true>(c, ldc, xq, xs, M, Kp, w, scales, panels, n_valid, bias, epilogue);
}

}  // namespace kael::kernels::neon
