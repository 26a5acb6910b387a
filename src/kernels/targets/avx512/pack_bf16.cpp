// The BF16 operands' conversions (gemm_bf16.hpp, and the activations of amx.hpp's bf16_linear):
// op(a) and op(b) into amx.hpp's BF16 layouts, rounded as core's f32_to_bf16 (bf16_round.hpp).
// Built with -mavx512bf16 (the *_bf16.cpp units of this folder); the products on these
// layouts are gemv_bf16.cpp's and the AMX tiles'.
#include <immintrin.h>

// GCC 12's AVX-512 headers start the unpacks and lane shuffles from _mm512_undefined_*, which
// -Wuninitialized reports in every caller.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>

#include "kernels/amx.hpp"
#include "kernels/targets/avx512/bf16_round.hpp"
#include "kernels/targets/avx512/kernels.hpp"

namespace kael::kernels::avx512 {
namespace {

__mmask16 lanes(std::int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xffff) : count <= 0 ? 0 : static_cast<__mmask16>((1u << count) - 1u);
}

// Dword j of each lane: the BF16 pair (lo[j], hi[j]), lo in the low half (the VNNI pair order).
__m512i bf16_pairs(__m512 lo, __m512 hi) {
  if ((subnormal_lanes(lo) | subnormal_lanes(hi)) == 0) {
    // Word 2 j from lo's j (word j of the row), word 2 j + 1 from hi's j (word 16 + j).
    const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
                                                22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    return _mm512_permutexvar_epi16(interleave, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
  }
  return _mm512_or_si512(bf16_lanes(lo), _mm512_slli_epi32(bf16_lanes(hi), 16));
}

// r (16 x 16 dwords, a row per vector) transposed in place: dwords within 128-bit lanes, then
// pairs of dwords, then the 128-bit lanes.
void transpose_dwords(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  __m512i u[16];  // u[4 b + q]: column 4 L + q of rows 4 b .. 4 b + 3, in lane L
  for (int b = 0; b < 16; b += 4) {
    u[b] = _mm512_unpacklo_epi64(t[b], t[b + 2]);
    u[b + 1] = _mm512_unpackhi_epi64(t[b], t[b + 2]);
    u[b + 2] = _mm512_unpacklo_epi64(t[b + 1], t[b + 3]);
    u[b + 3] = _mm512_unpackhi_epi64(t[b + 1], t[b + 3]);
  }
  for (int q = 0; q < 4; ++q) {
    const __m512i even01 = _mm512_shuffle_i32x4(u[q], u[4 + q], 0x88), odd01 = _mm512_shuffle_i32x4(u[q], u[4 + q], 0xDD);
    const __m512i even23 = _mm512_shuffle_i32x4(u[8 + q], u[12 + q], 0x88),
                  odd23 = _mm512_shuffle_i32x4(u[8 + q], u[12 + q], 0xDD);
    r[q] = _mm512_shuffle_i32x4(even01, even23, 0x88);
    r[8 + q] = _mm512_shuffle_i32x4(even01, even23, 0xDD);
    r[4 + q] = _mm512_shuffle_i32x4(odd01, odd23, 0x88);
    r[12 + q] = _mm512_shuffle_i32x4(odd01, odd23, 0xDD);
  }
}

// sums (width lanes of `mask`) += rows k and k + 1, those below `rows` only: a row past the end
// is not added, as + 0 would turn a -0 sum into +0. Rows in order, one add each.
void add_row_pair_to_sums(float* sums, __mmask16 mask, __m512 lo, __m512 hi, std::int64_t k, std::int64_t rows) {
  __m512 acc = _mm512_maskz_loadu_ps(mask, sums);
  if (k < rows) acc = _mm512_add_ps(acc, lo);
  if (k + 1 < rows) acc = _mm512_add_ps(acc, hi);
  _mm512_mask_storeu_ps(sums, mask, acc);
}

}  // namespace

// Rows of op(a) in groups [g0, g1) of 16. With `trans`, op(a)[r][k] = a[k][r]: chunk by chunk
// (32 rows of a) across all the groups, so a is read row after row rather than down a
// 64-byte column of it (which the prefetchers follow badly).
void bf16_pack_rows(std::uint16_t* dst, const float* a, std::int64_t lda, bool trans, std::int64_t M, std::int64_t K,
               std::int64_t g0, std::int64_t g1, bool tiled) {
  const std::int64_t Kp = bf16_padded_k(K), chunks = Kp / 32;
  const auto out = [&](std::int64_t row, std::int64_t chunk) { return dst + amx::chunk_byte(row, chunk, Kp * 2, tiled) / 2; };
  if (!trans) {
    for (std::int64_t g = g0; g < g1; ++g) {
      const std::int64_t r0 = g * 16, rows = std::clamp<std::int64_t>(M - r0, 0, 16);
      for (std::int64_t c = 0; c < chunks; ++c) {
        const std::int64_t k0 = c * 32;
        for (std::int64_t r = 0; r < 16; ++r) {
          const float* row = a + (r0 + r) * lda + k0;
          const bool live = r < rows;
          store_bf16(out(r0 + r, c), _mm512_maskz_loadu_ps(live ? lanes(K - k0) : 0, live ? row : a));
          store_bf16(out(r0 + r, c) + 16, _mm512_maskz_loadu_ps(live ? lanes(K - k0 - 16) : 0, live ? row + 16 : a));
        }
      }
    }
    return;
  }
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t k0 = c * 32;
    for (std::int64_t g = g0; g < g1; ++g) {
      const std::int64_t r0 = g * 16, rows = std::clamp<std::int64_t>(M - r0, 0, 16);
      // Lanes over r, one load per k; pair p of lane r holds (k0 + 2 p, k0 + 2 p + 1) of row
      // r, so a dword transpose gives each row its 32 k in order.
      const __mmask16 mask = lanes(rows);
      const auto column = [&](std::int64_t k) {
        const bool live = k < K;
        return _mm512_maskz_loadu_ps(live ? mask : 0, live ? a + k * lda + r0 : a);
      };
      __m512i pairs[16];
      for (std::int64_t p = 0; p < 16; ++p) pairs[p] = bf16_pairs(column(k0 + 2 * p), column(k0 + 2 * p + 1));
      transpose_dwords(pairs);
      for (std::int64_t r = 0; r < 16; ++r) _mm512_storeu_si512(out(r0 + r, c), pairs[r]);
    }
  }
}

// op(b)[k][n] = b[k][n]: rows k and k + 1 of each panel, interleaved as 16 pairs; pair by pair
// across the panels, so b is read row after row (a panel at a time walked down a 64-byte column
// of b). With column_sums, each row is also added to the sums of its columns, rows in order.
void bf16_pack_panels_sums(std::uint16_t* dst, float* column_sums, const float* b, std::int64_t ldb, std::int64_t N,
                      std::int64_t K, std::int64_t p0, std::int64_t p1) {
  const std::int64_t Kp = bf16_padded_k(K);
  for (std::int64_t k = 0; k < Kp; k += 2)
    for (std::int64_t p = p0; p < p1; ++p) {
      const std::int64_t n0 = p * kPanel, width = std::clamp<std::int64_t>(N - n0, 0, kPanel);
      const __mmask16 mask = lanes(width);
      const auto row = [&](std::int64_t kk) {
        const bool live = kk < K && width > 0;
        return _mm512_maskz_loadu_ps(live ? mask : 0, live ? b + kk * ldb + n0 : b);
      };
      const __m512 lo = row(k), hi = row(k + 1);
      if (column_sums != nullptr && width > 0) add_row_pair_to_sums(column_sums + n0, mask, lo, hi, k, K);
      _mm512_storeu_si512(dst + p * kPanel * Kp + k * 16, bf16_pairs(lo, hi));
    }
}

void bf16_pack_panels(std::uint16_t* dst, const float* b, std::int64_t ldb, bool trans, std::int64_t N, std::int64_t K,
                 std::int64_t p0, std::int64_t p1) {
  const std::int64_t Kp = bf16_padded_k(K);
  if (!trans) {
    bf16_pack_panels_sums(dst, nullptr, b, ldb, N, K, p0, p1);
    return;
  }
  for (std::int64_t p = p0; p < p1; ++p) {
    const std::int64_t n0 = p * kPanel, width = std::clamp<std::int64_t>(N - n0, 0, kPanel);
    std::uint16_t* panel = dst + p * kPanel * Kp;  // k-pair r at 32 r: column j's (k, k + 1) at 2 j
    // op(b)[k][n] = b[n][k]: a column's pairs are adjacent in b, so 32 k of column j make 16
    // pairs (dwords), then a 16 x 16 dword transpose puts them at pair-row r, column j.
    for (std::int64_t k0 = 0; k0 < Kp; k0 += 32) {
      __m512i by_column[16];
      for (std::int64_t j = 0; j < 16; ++j) {
        const float* col = b + (n0 + j) * ldb + k0;
        const bool live = j < width;
        by_column[j] = bf16_row(_mm512_maskz_loadu_ps(live ? lanes(K - k0) : 0, live ? col : b),
                                _mm512_maskz_loadu_ps(live ? lanes(K - k0 - 16) : 0, live && K - k0 > 16 ? col + 16 : b));
      }
      transpose_dwords(by_column);
      for (std::int64_t r = 0; r < 16; ++r) _mm512_storeu_si512(panel + k0 * 16 + r * 32, by_column[r]);
    }
  }
}

// x (M, N) as bf16_pack_rows's op(a) = x and bf16_pack_panels_sums's op(b) = x (with its column sums),
// equal bits, from one read: rows k and k + 1 of each 32-column chunk become two BF16 rows, and
// one word permute of the pair gives each of the chunk's two panels its (k, k + 1) pairs.
void bf16_pack_both(std::uint16_t* rows, std::uint16_t* panels, float* column_sums, const float* x, std::int64_t ldx,
               std::int64_t M, std::int64_t N, std::int64_t c0, std::int64_t c1, bool tiled) {
  const std::int64_t Kp = bf16_padded_k(N), Mp = bf16_padded_k(M);
  // Word 2 j: the first row's word j (+ 16 for the second panel); word 2 j + 1: the second row's.
  const __m512i left = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
                                        37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  const __m512i right = _mm512_add_epi16(left, _mm512_set1_epi16(16));
  for (std::int64_t k = 0; k < Mp; k += 2)
    for (std::int64_t c = c0; c < c1; ++c) {
      const std::int64_t n0 = c * 32;
      const auto load = [&](std::int64_t kk, std::int64_t from) {
        const std::int64_t width = std::clamp<std::int64_t>(N - from, 0, kPanel);
        const bool live = kk < M && width > 0;
        return _mm512_maskz_loadu_ps(live ? lanes(width) : 0, live ? x + kk * ldx + from : x);
      };
      const __m512 lo0 = load(k, n0), lo1 = load(k, n0 + 16), hi0 = load(k + 1, n0), hi1 = load(k + 1, n0 + 16);
      const __m512i first = bf16_row(lo0, lo1), second = bf16_row(hi0, hi1);
      _mm512_storeu_si512(rows + amx::chunk_byte(k, c, Kp * 2, tiled) / 2, first);
      _mm512_storeu_si512(rows + amx::chunk_byte(k + 1, c, Kp * 2, tiled) / 2, second);
      _mm512_storeu_si512(panels + 2 * c * kPanel * Mp + k * 16, _mm512_permutex2var_epi16(first, left, second));
      _mm512_storeu_si512(panels + (2 * c + 1) * kPanel * Mp + k * 16, _mm512_permutex2var_epi16(first, right, second));
      if (column_sums == nullptr) continue;
      for (int half = 0; half < 2; ++half) {
        const std::int64_t from = n0 + 16 * half, width = std::clamp<std::int64_t>(N - from, 0, kPanel);
        if (width > 0)
          add_row_pair_to_sums(column_sums + from, lanes(width), half == 0 ? lo0 : lo1, half == 0 ? hi0 : hi1, k, M);
      }
    }
}

}  // namespace kael::kernels::avx512
