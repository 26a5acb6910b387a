// The int8 GEMM of int8.hpp (family/int8.hpp) with AVX-VNNI's vpdpbusd; the AVX2 table takes
// it only when the CPU has AVX-VNNI. The rest of kernels/avx2 stays plain AVX2. vpdpbusd does in
// one instruction what pmaddubsw, pmaddwd and paddd do in three (int8.cpp), with the same sign
// trick (int8_dot.hpp) and the same exact sums.
#pragma GCC target("avxvnni")

#include <immintrin.h>

#include "kernels/targets/avx2/int8_dot.hpp"
#include "kernels/targets/avx2/kernels.hpp"
#include "kernels/targets/avx2/vec.hpp"
#include "kernels/family/int8.hpp"

namespace kael::kernels::avx2 {
namespace {

// The dot step of family/int8.hpp.
struct AvxVnni : SignedBytes<AvxVnni> {
  static Sum step(Sum sum, const Activations& a, __m256i w) {
    return _mm256_dpbusd_avx_epi32(sum, a.xabs, _mm256_sign_epi8(w, a.x));
  }
};

}  // namespace

void int8_gemm_vnni(float* c, std::int64_t ldc, const std::int8_t* xq, const float* xs, std::int64_t M,
                    std::int64_t Kp, const std::int8_t* w, const std::uint16_t* scales, std::int64_t panels,
                    std::int64_t n_valid, const float* bias, Epilogue epilogue) {
  family::int8_gemm<Vec, AvxVnni>(c, ldc, xq, xs, M, Kp, w, scales, panels, n_valid, bias, epilogue);
}

}  // namespace kael::kernels::avx2
