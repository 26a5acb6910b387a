// AVX2+FMA matrix products. The micro-kernel keeps an MR x (16 NP) block of outputs in
// registers (2 NP ymm per row) while it walks k: per k it loads the 16-wide rows of NP panels
// and broadcasts one input per row, MR * NP * 2 FMAs. Shapes used:
//   MR <= 6, NP = 1: 12 accumulators + 2 loads + 1 broadcast of 16 registers, the classic
//                    6x16 AVX2 block, FMA-bound (prefill, batched decode);
//   MR = 2, NP = 2 and MR = 1, NP = 4: 8 independent FMA chains per row pair, enough to hide
//                    the FMA latency, reading 2 or 4 panel streams at once (decode, which is
//                    bound by reading the weights).
// Every output is a single FMA chain over k in order, then + bias, whatever MR, NP or the
// thread split: a row's result does not depend on how many rows came with it.
#include <immintrin.h>

#include "kernels/avx2/math.hpp"
#include "kernels/avx2/kernels.hpp"

namespace kael::kernels::avx2 {
namespace {

// c (MR, 16 NP) for panels b, b + panel_stride, ... With MASKED (NP = 1 only) the panel has
// w < 16 valid columns; masked loads never touch memory past them. `next`, when not null, is
// a panel of the same shape to pull towards the cache meanwhile, one 64-byte row per k.
template <int MR, int NP, bool MASKED>
void tile(float* c, long ldc, const float* a, long lda, const float* b, long ldb, long panel_stride, long K,
          const float* bias, Epilogue epilogue, long w, const float* next = nullptr) {
  static_assert(!MASKED || NP == 1);
  // A flat array with fully unrolled loops: GCC keeps it in registers (a nested array it
  // spilled to the stack on every k).
  constexpr int kAcc = MR * NP * 2;
  __m256 acc[kAcc];
#pragma GCC unroll 16
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm256_setzero_ps();
  const __m256i lo = tail_mask(w < 8 ? w : 8), hi = tail_mask(w > 8 ? w - 8 : 0);
  for (long k = 0; k < K; ++k) {
    if (next != nullptr) _mm_prefetch(reinterpret_cast<const char*>(next + k * ldb), _MM_HINT_T0);
    __m256 row[NP * 2];
#pragma GCC unroll 8
    for (int p = 0; p < NP; ++p) {
      const float* bk = b + p * panel_stride + k * ldb;
      row[2 * p] = MASKED ? _mm256_maskload_ps(bk, lo) : _mm256_loadu_ps(bk);
      row[2 * p + 1] = MASKED ? _mm256_maskload_ps(bk + 8, hi) : _mm256_loadu_ps(bk + 8);
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m256 x = _mm256_broadcast_ss(a + r * lda + k);
#pragma GCC unroll 8
      for (int i = 0; i < NP * 2; ++i) acc[r * NP * 2 + i] = _mm256_fmadd_ps(x, row[i], acc[r * NP * 2 + i]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < kAcc; ++i) {
    const int r = i / (NP * 2), col = 8 * (i % (NP * 2));
    if (MASKED && col >= w) continue;
    finish<MASKED>(c + r * ldc + col, acc[i], bias ? bias + col : nullptr, epilogue, col ? hi : lo);
  }
}

// Rows [0, M) of one panel group, in row blocks of up to 6. The first block also prefetches
// `next`, the panel after this one: with few rows (a decode batch) the first block would
// otherwise wait on memory for the whole panel while the others find it in cache; this way
// the next panel's memory traffic overlaps this panel's arithmetic.
template <int NP, bool MASKED>
void rows_of(float* c, long ldc, const float* a, long lda, const float* b, long ldb, long panel_stride, long M,
             long K, const float* bias, Epilogue epilogue, long w, const float* next = nullptr) {
  long r = 0;
  for (; r + 6 <= M; r += 6, next = nullptr)
    tile<6, NP, MASKED>(c + r * ldc, ldc, a + r * lda, lda, b, ldb, panel_stride, K, bias, epilogue, w, next);
  float* cr = c + r * ldc;
  const float* ar = a + r * lda;
  switch (M - r) {
    case 5: tile<5, NP, MASKED>(cr, ldc, ar, lda, b, ldb, panel_stride, K, bias, epilogue, w, next); break;
    case 4: tile<4, NP, MASKED>(cr, ldc, ar, lda, b, ldb, panel_stride, K, bias, epilogue, w, next); break;
    case 3: tile<3, NP, MASKED>(cr, ldc, ar, lda, b, ldb, panel_stride, K, bias, epilogue, w, next); break;
    case 2: tile<2, NP, MASKED>(cr, ldc, ar, lda, b, ldb, panel_stride, K, bias, epilogue, w, next); break;
    case 1: tile<1, NP, MASKED>(cr, ldc, ar, lda, b, ldb, panel_stride, K, bias, epilogue, w, next); break;
    default: break;
  }
}

// Few rows: several panels per pass so that enough FMA chains are in flight.
void skinny(float* c, long ldc, const float* a, long lda, const float* b, long ldb, long panel_stride, long M,
            long K, const float* bias, Epilogue epilogue, long full_panels) {
  long p = 0;
  const auto at = [&](long panel) { return b + panel * panel_stride; };
  const auto bias_at = [&](long panel) { return bias ? bias + 16 * panel : nullptr; };
  if (M == 1)
    for (; p + 4 <= full_panels; p += 4)
      tile<1, 4, false>(c + 16 * p, ldc, a, lda, at(p), ldb, panel_stride, K, bias_at(p), epilogue, 16);
  for (; p + 2 <= full_panels; p += 2)
    for (long r = 0; r < M; r += 2) {
      if (M - r >= 2)
        tile<2, 2, false>(c + r * ldc + 16 * p, ldc, a + r * lda, lda, at(p), ldb, panel_stride, K, bias_at(p),
                          epilogue, 16);
      else
        tile<1, 2, false>(c + r * ldc + 16 * p, ldc, a + r * lda, lda, at(p), ldb, panel_stride, K, bias_at(p),
                          epilogue, 16);
    }
  for (; p < full_panels; ++p)
    rows_of<1, false>(c + 16 * p, ldc, a, lda, at(p), ldb, panel_stride, M, K, bias_at(p), epilogue, 16);
}

// One (up to 4) x (up to 4) block of dot products: a rows against b rows, 8 lanes per pair,
// the ragged end of K through masked loads, lanes summed in a fixed order.
template <int MR, int NR>
void nt_tile(float* out, long ldo, const float* a, long lda, const float* b, long ldb, long K, float scale) {
  __m256 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  long k = 0;
  for (; k + 8 <= K; k += 8) {
    __m256 bv[NR];
    for (int j = 0; j < NR; ++j) bv[j] = _mm256_loadu_ps(b + j * ldb + k);
    for (int i = 0; i < MR; ++i) {
      const __m256 av = _mm256_loadu_ps(a + i * lda + k);
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(av, bv[j], acc[i][j]);
    }
  }
  if (k < K) {
    const __m256i mask = tail_mask(K - k);
    __m256 bv[NR];
    for (int j = 0; j < NR; ++j) bv[j] = _mm256_maskload_ps(b + j * ldb + k, mask);
    for (int i = 0; i < MR; ++i) {
      const __m256 av = _mm256_maskload_ps(a + i * lda + k, mask);
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(av, bv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) out[i * ldo + j] = hsum8(acc[i][j]) * scale;
}

template <int MR>
void nt_rows(float* out, long ldo, const float* a, long lda, const float* b, long ldb, long N, long K,
             float scale) {
  long j = 0;
  for (; j + 4 <= N; j += 4) nt_tile<MR, 4>(out + j, ldo, a, lda, b + j * ldb, ldb, K, scale);
  switch (N - j) {
    case 3: nt_tile<MR, 3>(out + j, ldo, a, lda, b + j * ldb, ldb, K, scale); break;
    case 2: nt_tile<MR, 2>(out + j, ldo, a, lda, b + j * ldb, ldb, K, scale); break;
    case 1: nt_tile<MR, 1>(out + j, ldo, a, lda, b + j * ldb, ldb, K, scale); break;
    default: break;
  }
}

}  // namespace

void gemm_panels(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                 std::int64_t panel_stride, bool packed, std::int64_t M, std::int64_t N, std::int64_t K,
                 const float* bias, Epilogue epilogue) {
  if (M <= 0 || N <= 0) return;
  const long full_panels = N / 16, w = N % 16;
  if (M <= 2) {
    skinny(c, ldc, a, lda, b, ldb, panel_stride, M, K, bias, epilogue, full_panels);
  } else {
    for (long p = 0; p < full_panels; ++p)
      rows_of<1, false>(c + 16 * p, ldc, a, lda, b + p * panel_stride, ldb, panel_stride, M, K,
                        bias ? bias + 16 * p : nullptr, epilogue, 16,
                        p + 1 < full_panels ? b + (p + 1) * panel_stride : nullptr);
  }
  if (w > 0) {
    const long p = full_panels;
    rows_of<1, true>(c + 16 * p, ldc, a, lda, b + p * panel_stride, packed ? w : ldb, panel_stride, M, K,
                     bias ? bias + 16 * p : nullptr, epilogue, w);
  }
}

void gemm_nt(float* out, std::int64_t ldo, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
             std::int64_t M, std::int64_t N, std::int64_t K, float scale) {
  // Rows of a in threes: 3 x 4 accumulators + 4 b rows + 1 a row = 16 registers.
  long i = 0;
  for (; i + 3 <= M; i += 3) nt_rows<3>(out + i * ldo, ldo, a + i * lda, lda, b, ldb, N, K, scale);
  if (M - i == 2) nt_rows<2>(out + i * ldo, ldo, a + i * lda, lda, b, ldb, N, K, scale);
  if (M - i == 1) nt_rows<1>(out + i * ldo, ldo, a + i * lda, lda, b, ldb, N, K, scale);
}

}  // namespace kael::kernels::avx2
