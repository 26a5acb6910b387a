// amx.hpp's per-column int8 format on AVX512-VNNI: the activation quantizer (for the tiles
// too) and the GEMV that serves fewer rows than the tiles take. Each zmm accumulator keeps 16
// outputs; one 32-column block (two panels) at a time for up to four rows.
#include <immintrin.h>

#include <algorithm>
#include <limits>

#include "kernels/amx.hpp"
#include "kernels/amx_output.hpp"
#include "kernels/targets/avx512/gemv_rows.hpp"
#include "kernels/targets/avx512/kernels.hpp"

namespace kael::kernels::avx512 {
namespace {

// c rows [0, R) of one 32-column block (width of them kept) = epilogue(int8c_output + bias).
template <int R>
void int8c_rows(float* c, std::int64_t ldc, const std::int8_t* a, const float* xs, std::int64_t Kp,
                const std::int8_t* w, const float* scales, const std::int32_t* sums, std::int64_t col,
                std::int64_t width, const float* bias, Epilogue epilogue) {
  __m512i acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
  const std::int8_t* w1 = w + 16 * Kp;
  // vpdpbusd multiplies unsigned by signed bytes: the activations go in as x + 128 (x ^ 0x80),
  // and 128 * (column sum) comes off at the end, exactly.
  const std::int32_t flip = static_cast<std::int32_t>(0x80808080u);
  for (std::int64_t k = 0; k < Kp; k += 4) {
    const __m512i b0 = _mm512_loadu_si512(w + k * 16);
    const __m512i b1 = _mm512_loadu_si512(w1 + k * 16);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512i x = _mm512_set1_epi32(load_dword(a + r * Kp + k) ^ flip);
      acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], x, b0);
      acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], x, b1);
    }
  }
  alignas(64) std::int32_t dot[32];
  alignas(64) float y[32] = {};
  for (int r = 0; r < R; ++r) {
    _mm512_store_si512(dot, acc[r][0]);
    _mm512_store_si512(dot + 16, acc[r][1]);
    for (std::int64_t j = 0; j < 32; ++j) dot[j] -= 128 * sums[col + j];
    int8c_row(y, dot, xs[r], scales + col, bias ? bias + col : nullptr, width);
    finish_row(c + r * ldc + col, y, width, epilogue);
  }
}

}  // namespace

void int8c_quantize_rows(std::int8_t* xq, float* xs, const float* x, std::int64_t T, std::int64_t K,
                         std::int64_t Kp, bool tiled) {
  const __m512 sign = _mm512_set1_ps(-0.0f), zero = _mm512_setzero_ps();
  const auto mask = [K](std::int64_t k) { return static_cast<__mmask16>(K - k >= 16 ? 0xffff : (1u << (K - k)) - 1); };
  for (std::int64_t t = 0; t < T; ++t) {
    const float* row = x + t * K;
    __m512 amax = zero, probe = zero;  // probe: NaN when the row holds an infinity or NaN
    for (std::int64_t k = 0; k < K; k += 16) {
      const __m512 v = _mm512_maskz_loadu_ps(mask(k), row + k);
      amax = _mm512_max_ps(amax, _mm512_andnot_ps(sign, v));
      probe = _mm512_add_ps(probe, _mm512_mul_ps(v, zero));
    }
    const float m = _mm512_reduce_max_ps(amax);
    const bool finite = _mm512_cmp_ps_mask(probe, probe, _CMP_UNORD_Q) == 0;
    xs[t] = finite ? m / 127.0f : std::numeric_limits<float>::quiet_NaN();
    const bool zeros = !finite || m == 0.0f;  // all-zero or non-finite rows quantize to zeros
    const __m512 inv = _mm512_set1_ps(zeros ? 0.0f : 127.0f / m);
    for (std::int64_t c = 0; c < Kp / 64; ++c) {
      std::int8_t* q = xq + amx::chunk_byte(t, c, Kp, tiled);
#pragma GCC unroll 4
      for (std::int64_t i = 0; i < 64; i += 16) {
        const std::int64_t k = c * 64 + i;
        const __m512 v = k < K && !zeros ? _mm512_maskz_loadu_ps(mask(k), row + k) : zero;
        // round to nearest even
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v, inv))));
      }
    }
  }
}

void int8c_gemv(float* c, std::int64_t ldc, const std::int8_t* a, const float* xs, std::int64_t M, std::int64_t Kp,
                const std::int8_t* w, const float* scales, const std::int32_t* sums, std::int64_t blocks,
                std::int64_t n_valid, const float* bias, Epilogue epilogue) {
  for (std::int64_t block = 0; block < blocks; ++block) {
    const std::int64_t col = block * 32, width = std::min<std::int64_t>(32, n_valid - col);
    const std::int8_t* wb = w + col * Kp;
    over_row_passes(M, [&](std::int64_t r, auto rows) {
      int8c_rows<decltype(rows)::value>(c + r * ldc, ldc, a + r * Kp, xs + r, Kp, wb, scales, sums, col, width, bias,
                                        epilogue);
    });
  }
}

}  // namespace kael::kernels::avx512
