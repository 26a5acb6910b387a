// The int8 GEMM of int8.hpp with AVX-VNNI's vpdpbusd (int8_gemm.hpp); the AVX2 table takes it
// only when the CPU has AVX-VNNI. The rest of kernels/avx2 stays plain AVX2.
#pragma GCC target("avxvnni")

#include "kernels/avx2/int8_gemm.hpp"

namespace kael::kernels::avx2 {

void int8_gemm_vnni(float* c, std::int64_t ldc, const std::int8_t* xq, const float* xs, std::int64_t M,
                    std::int64_t Kp, const std::int8_t* w, const std::uint16_t* scales, std::int64_t panels,
                    std::int64_t n_valid, const float* bias, Epilogue epilogue) {
  gemm<true>(c, ldc, xq, xs, M, Kp, w, scales, panels, n_valid, bias, epilogue);
}

}  // namespace kael::kernels::avx2
