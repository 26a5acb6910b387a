// The AVX-512 halves of amx.hpp: the activation conversion to BF16 and the two GEMVs that
// serve few rows (decode) or a CPU without AMX. Each keeps 16 outputs per zmm accumulator, two
// panels (one 32-column block) at a time for up to 4 rows, so one weight load feeds 4 rows.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/amx.hpp"
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
    for (std::int64_t j = 0; j < width; ++j) y[j] += bias ? bias[col + j] : 0.0f;
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
    for (std::int64_t j = 0; j < width; ++j)
      y[j] = int8c_output(dot[j] - 128 * sums[col + j], xs[r], scales[col + j], bias ? bias[col + j] : 0.0f);
    finish_row(c + r * ldc + col, y, width, epilogue);
  }
}

}  // namespace

void convert_rows_bf16(std::uint16_t* a, const float* x, std::int64_t M, std::int64_t K, std::int64_t Kp) {
  for (std::int64_t t = 0; t < M; ++t) {
    const float* row = x + t * K;
    std::uint16_t* out = a + t * Kp;
    std::int64_t k = 0;
    for (; k + 32 <= K; k += 32) {
      const __m512bh h = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(row + k + 16), _mm512_loadu_ps(row + k));
      _mm512_storeu_si512(out + k, (__m512i)h);
    }
    if (k < K) {
      const std::int64_t n = K - k;
      const __mmask16 lo = static_cast<__mmask16>(n >= 16 ? 0xffff : (1u << n) - 1);
      const __mmask16 hi = static_cast<__mmask16>(n <= 16 ? 0 : (1u << (n - 16)) - 1);
      const __m512bh h =
          _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, row + k + 16), _mm512_maskz_loadu_ps(lo, row + k));
      _mm512_storeu_si512(out + k, (__m512i)h);  // zeros past K, within Kp (a multiple of 32)
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
