// The AVX-512 halves of amx.hpp: the activation conversion to BF16 and the two GEMVs that
// serve few rows (decode) or a CPU without AMX. Each keeps 16 outputs per zmm accumulator, two
// panels (one 32-column block) at a time for up to 4 rows, so one weight load feeds 4 rows.
#include <immintrin.h>

// GCC 12's AVX-512 headers start reductions and narrowing conversions from _mm512_undefined_*,
// which -Wmaybe-uninitialized reports in every caller.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cstring>
#include <limits>

#include "kernels/amx.hpp"
#include "kernels/amx/bf16_round.hpp"
#include "kernels/amx/epilogue.hpp"

namespace kael::kernels::amx {
namespace {

constexpr std::int64_t kRows = 4;  // rows per pass

std::int32_t load_dword(const void* p) {
  std::int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

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

void quantize_rows_int8c(std::int8_t* xq, float* xs, const float* x, std::int64_t T, std::int64_t K,
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
      std::int8_t* q = xq + chunk_byte(t, c, Kp, tiled);
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

void convert_rows_bf16(std::uint16_t* a, const float* x, std::int64_t M, std::int64_t K, std::int64_t Kp,
                       bool tiled) {
  for (std::int64_t t = 0; t < M; ++t) {
    const float* row = x + t * K;
    for (std::int64_t k = 0; k < Kp; k += 32) {
      const std::int64_t n = std::clamp<std::int64_t>(K - k, 0, 32);
      const __mmask16 lo = static_cast<__mmask16>(n >= 16 ? 0xffff : (1u << n) - 1);
      const __mmask16 hi = static_cast<__mmask16>(n <= 16 ? 0 : n >= 32 ? 0xffff : (1u << (n - 16)) - 1);
      const __m512i h = bf16_row(_mm512_maskz_loadu_ps(lo, row + k), _mm512_maskz_loadu_ps(hi, row + k + 16));
      _mm512_storeu_si512(a + chunk_byte(t, k / 32, Kp * 2, tiled) / 2, h);
    }
  }
}

void bf16_gemv(float* c, std::int64_t ldc, const std::uint16_t* a, std::int64_t M, std::int64_t Kp,
               const std::uint16_t* w, std::int64_t blocks, std::int64_t n_valid, const float* bias,
               Epilogue epilogue) {
  for (std::int64_t block = 0; block < blocks; ++block) {
    const std::int64_t col = block * 32, width = std::min<std::int64_t>(32, n_valid - col);
    const std::uint16_t* wb = w + col * Kp;
    std::int64_t r = 0;
    for (; r + kRows <= M; r += kRows)
      bf16_rows<kRows>(c + r * ldc, ldc, a + r * Kp, Kp, wb, col, width, bias, epilogue);
    switch (M - r) {
      case 3: bf16_rows<3>(c + r * ldc, ldc, a + r * Kp, Kp, wb, col, width, bias, epilogue); break;
      case 2: bf16_rows<2>(c + r * ldc, ldc, a + r * Kp, Kp, wb, col, width, bias, epilogue); break;
      case 1: bf16_rows<1>(c + r * ldc, ldc, a + r * Kp, Kp, wb, col, width, bias, epilogue); break;
      default: break;
    }
  }
}

void int8c_gemv(float* c, std::int64_t ldc, const std::int8_t* a, const float* xs, std::int64_t M, std::int64_t Kp,
                const std::int8_t* w, const float* scales, const std::int32_t* sums, std::int64_t blocks,
                std::int64_t n_valid, const float* bias, Epilogue epilogue) {
  for (std::int64_t block = 0; block < blocks; ++block) {
    const std::int64_t col = block * 32, width = std::min<std::int64_t>(32, n_valid - col);
    const std::int8_t* wb = w + col * Kp;
    std::int64_t r = 0;
    for (; r + kRows <= M; r += kRows)
      int8c_rows<kRows>(c + r * ldc, ldc, a + r * Kp, xs + r, Kp, wb, scales, sums, col, width, bias, epilogue);
    switch (M - r) {
      case 3: int8c_rows<3>(c + r * ldc, ldc, a + r * Kp, xs + r, Kp, wb, scales, sums, col, width, bias, epilogue); break;
      case 2: int8c_rows<2>(c + r * ldc, ldc, a + r * Kp, xs + r, Kp, wb, scales, sums, col, width, bias, epilogue); break;
      case 1: int8c_rows<1>(c + r * ldc, ldc, a + r * Kp, xs + r, Kp, wb, scales, sums, col, width, bias, epilogue); break;
      default: break;
    }
  }
}

}  // namespace kael::kernels::amx
