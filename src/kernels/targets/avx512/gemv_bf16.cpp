// The AVX512-BF16 GEMV of amx.hpp's BF16 format: the product on a CPU without AMX, and
// decode's on every CPU with AVX512-BF16 but no AMX-BF16. Each zmm accumulator keeps 16
// outputs; one 32-column block (two panels) at a time for up to four rows. Built with
// -mavx512bf16 (the *_bf16.cpp units of this folder).
#include <immintrin.h>

#include <algorithm>

#include "kernels/amx.hpp"
#include "kernels/amx_output.hpp"
#include "kernels/targets/avx512/gemv_rows.hpp"
#include "kernels/targets/avx512/kernels.hpp"

namespace kael::kernels::avx512 {
namespace {

// c rows [0, R) of one 32-column block (width of them kept) = epilogue(a @ w + bias).
template <int R>
void bf16_rows(float* c, std::int64_t ldc, const std::uint16_t* a, std::int64_t Kp, const std::uint16_t* w,
               std::int64_t col, std::int64_t width, const float* bias, Epilogue epilogue) {
  __m512 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  const std::uint16_t* w1 = w + 16 * Kp;
  for (std::int64_t k = 0; k < Kp; k += 2) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(w + k * 16);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(w1 + k * 16);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512bh x = (__m512bh)_mm512_set1_epi32(load_dword(a + r * Kp + k));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], x, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], x, b1);
    }
  }
  alignas(64) float y[32] = {};
  for (int r = 0; r < R; ++r) {
    _mm512_store_ps(y, acc[r][0]);
    _mm512_store_ps(y + 16, acc[r][1]);
    add_bias(y, bias ? bias + col : nullptr, width);
    finish_row(c + r * ldc + col, y, width, epilogue);
  }
}

}  // namespace

void gemm_bf16_gemv(float* c, std::int64_t ldc, const std::uint16_t* a, std::int64_t M, std::int64_t Kp,
                    const std::uint16_t* w, std::int64_t blocks, std::int64_t n_valid, const float* bias,
                    Epilogue epilogue) {
  for (std::int64_t block = 0; block < blocks; ++block) {
    const std::int64_t col = block * 32, width = std::min<std::int64_t>(32, n_valid - col);
    const std::uint16_t* wb = w + col * Kp;
    over_row_passes(M, [&](std::int64_t r, auto rows) {
      bf16_rows<decltype(rows)::value>(c + r * ldc, ldc, a + r * Kp, Kp, wb, col, width, bias, epilogue);
    });
  }
}

}  // namespace kael::kernels::avx512
