// The AVX512-BF16 GEMV of amx.hpp's BF16 format: the product on a CPU without AMX, and
// decode's on every CPU with AVX512-BF16 but no AMX-BF16. Each zmm accumulator keeps 16
// outputs; two 16-column panels at a time for up to four rows. Built with
// -mavx512bf16 (the *_bf16.cpp units of this folder).
#include <immintrin.h>

#include <algorithm>

#include "kernels/amx.hpp"
#include "kernels/amx_output.hpp"
#include "kernels/targets/avx512/gemv_rows.hpp"
#include "kernels/targets/avx512/kernels.hpp"

namespace kael::kernels::avx512 {
namespace {

// c rows [0, R) of two 16-column panels, w0 and w1 (their columns col[0] and col[1], width[i]
// of each kept) = epilogue(a @ w + bias).
template <int R>
void bf16_rows(float* c, std::int64_t ldc, const std::uint16_t* a, std::int64_t Kp, const std::uint16_t* w0,
               const std::uint16_t* w1, const std::int64_t (&col)[2], const std::int64_t (&width)[2],
               const float* bias, Epilogue epilogue) {
  __m512 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (std::int64_t k = 0; k < Kp; k += 2) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(w0 + k * 16);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(w1 + k * 16);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512bh x = (__m512bh)_mm512_set1_epi32(load_dword(a + r * Kp + k));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], x, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], x, b1);
    }
  }
  alignas(64) float y[32];
  const bool side_by_side = col[1] == col[0] + 16;  // one pass over the 32 outputs
  for (int r = 0; r < R; ++r) {
    _mm512_store_ps(y, acc[r][0]);
    _mm512_store_ps(y + 16, acc[r][1]);
    if (side_by_side) {
      const std::int64_t both = width[0] + std::max<std::int64_t>(0, width[1]);
      add_bias(y, bias ? bias + col[0] : nullptr, both);
      finish_row(c + r * ldc + col[0], y, both, epilogue);
      continue;
    }
    for (int i = 0; i < 2; ++i) {
      if (width[i] <= 0) continue;
      add_bias(y + 16 * i, bias ? bias + col[i] : nullptr, width[i]);
      finish_row(c + r * ldc + col[i], y + 16 * i, width[i], epilogue);
    }
  }
}

}  // namespace

// One pass of rows (decode) reads the blocks' 2 x blocks panels (each Kp x 16, the next right
// after it) in pairs `blocks` panels apart, panel j beside panel j + blocks: each of the two
// streams then runs on into the next pair's panel, where a block's own two panels made every
// pair start its streams afresh (docs/performance.md, "Decode: panel streams that run on").
// More rows read the weights from the caches once per pass and pair a block's own panels, whose
// outputs share a row's cache lines (apart, a 2048-row product ran up to 14% slower).
void gemm_bf16_gemv(float* c, std::int64_t ldc, const std::uint16_t* a, std::int64_t M, std::int64_t Kp,
                    const std::uint16_t* w, std::int64_t blocks, std::int64_t n_valid, const float* bias,
                    Epilogue epilogue) {
  const bool apart = M <= kGemvRows;
  for (std::int64_t j = 0; j < blocks; ++j) {
    const std::int64_t first = apart ? j : 2 * j, second = apart ? j + blocks : 2 * j + 1;
    const std::int64_t col[2] = {16 * first, 16 * second};
    const std::int64_t width[2] = {std::min<std::int64_t>(16, n_valid - col[0]),
                                   std::min<std::int64_t>(16, n_valid - col[1])};
    const std::uint16_t* w0 = w + col[0] * Kp;
    const std::uint16_t* w1 = w + col[1] * Kp;
    over_row_passes(M, [&](std::int64_t r, auto rows) {
      bf16_rows<decltype(rows)::value>(c + r * ldc, ldc, a + r * Kp, Kp, w0, w1, col, width, bias, epilogue);
    });
  }
}

}  // namespace kael::kernels::avx512
