// The NEON int8 GEMM of int8.hpp (family/int8.hpp) with widening multiplies: any ARMv8-A CPU.
// smull (int8 x int8 -> int16, 8 products), addp (adjacent pairs: |sum| <= 2 * 127 * 127, inside
// int16) and sadalp (pairs again, into int32) give each column's dot, the same exact sums as SDOT
// (int8_dotprod.cpp).
#include <arm_neon.h>

#include "kernels/family/int8.hpp"
#include "kernels/targets/neon/int8_dot.hpp"
#include "kernels/targets/neon/kernels.hpp"
#include "kernels/targets/neon/vec.hpp"

namespace kael::kernels::neon {
namespace {

// The dot step of family/int8.hpp.
struct Smull : DupActivations<Smull> {
  static Sum step(Sum sum, int8x16_t x, int8x16_t w) {
    const int16x8_t lo = vmull_s8(vget_low_s8(w), vget_low_s8(x)), hi = vmull_high_s8(w, x);
    return vpadalq_s16(sum, vpaddq_s16(lo, hi));
  }
};

}  // namespace

void int8_gemm(float* c, std::int64_t ldc, const std::int8_t* xq, const float* xs, std::int64_t M, std::int64_t Kp,
               const std::int8_t* w, const std::uint16_t* scales, std::int64_t panels, std::int64_t n_valid,
               const float* bias, Epilogue epilogue) {
  family::int8_gemm<Vec, Smull>(c, ldc, xq, xs, M, Kp, w, scales, panels, n_valid, bias, epilogue);
}

}  // namespace kael::kernels::neon
