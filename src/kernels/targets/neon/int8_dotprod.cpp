// The NEON int8 GEMM of int8.hpp (family/int8.hpp) with SDOT, compiled with
// -march=armv8.2-a+dotprod (src/CMakeLists.txt); the NEON table takes it only when the CPU
// reports the dot-product extension. The rest of kernels/neon stays baseline ARMv8-A. A k4 block
// (int8_dot.hpp) is exactly SDOT's operand order: lane j += the dot of bytes 4j..4j+3 of both
// operands.
#include <arm_neon.h>

#include "kernels/family/int8.hpp"
#include "kernels/targets/neon/int8_dot.hpp"
#include "kernels/targets/neon/kernels.hpp"
#include "kernels/targets/neon/vec.hpp"

namespace kael::kernels::neon {
namespace {

// The dot step of family/int8.hpp.
struct Sdot : DupActivations<Sdot> {
  static Sum step(Sum sum, int8x16_t x, int8x16_t w) { return vdotq_s32(sum, w, x); }
};

}  // namespace

void int8_gemm_sdot(float* c, std::int64_t ldc, const std::int8_t* xq, const float* xs, std::int64_t M,
                    std::int64_t Kp, const std::int8_t* w, const std::uint16_t* scales, std::int64_t panels,
                    std::int64_t n_valid, const float* bias, Epilogue epilogue) {
  family::int8_gemm<Vec, Sdot>(c, ldc, xq, xs, M, Kp, w, scales, panels, n_valid, bias, epilogue);
}

}  // namespace kael::kernels::neon
