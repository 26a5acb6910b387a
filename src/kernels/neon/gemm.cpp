// NEON matrix products. The micro-kernel keeps an MR x (16 NP) block of outputs in registers
// (4 NP q-registers per row) while it walks k: per k it loads the 16-wide rows of NP panels
// and multiplies them by one input per row (fmla by element), MR * NP * 4 FMAs. AArch64 has
// 32 vector registers, so the shapes are:
//   MR <= 6, NP = 1: 24 accumulators + 4 panel loads + the inputs, FMA-bound (prefill,
//                    batched decode);
//   MR = 2, NP = 2 and MR = 1, NP = 4: 16 accumulators and 8 or 16 loads, reading 2 or 4
//                    panel streams at once (decode, bound by reading the weights).
// Every output is a single FMA chain over k in order, then + bias, whatever MR, NP or the
// thread split: a row's result does not depend on how many rows came with it.
#include <arm_neon.h>

#include "kernels/neon/kernels.hpp"
#include "kernels/neon/math.hpp"

namespace kael::kernels::neon {
namespace {

// c (MR, 16 NP) for panels b, b + panel_stride, ... With RAGGED (NP = 1 only) the panel has
// w < 16 valid columns, and its rows are read through a zero-padded copy so that no load
// passes its end.
template <int MR, int NP, bool RAGGED>
void tile(float* c, long ldc, const float* a, long lda, const float* b, long ldb, long panel_stride, long K,
          const float* bias, Epilogue epilogue, long w) {
  static_assert(!RAGGED || NP == 1);
  constexpr int kAcc = MR * NP * 4;
  float32x4_t acc[kAcc];
#pragma GCC unroll 32
  for (int i = 0; i < kAcc; ++i) acc[i] = vdupq_n_f32(0.0f);
  float padded[16] = {};
  for (long k = 0; k < K; ++k) {
    float32x4_t row[NP * 4];
    if constexpr (RAGGED) {
      std::memcpy(padded, b + k * ldb, static_cast<std::size_t>(w) * sizeof(float));
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) row[i] = vld1q_f32(padded + 4 * i);
    } else {
#pragma GCC unroll 16
      for (int i = 0; i < NP * 4; ++i) row[i] = vld1q_f32(b + (i / 4) * panel_stride + k * ldb + 4 * (i % 4));
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const float x = a[r * lda + k];
#pragma GCC unroll 16
      for (int i = 0; i < NP * 4; ++i) acc[r * NP * 4 + i] = vfmaq_n_f32(acc[r * NP * 4 + i], row[i], x);
    }
  }
#pragma GCC unroll 32
  for (int i = 0; i < kAcc; ++i) {
    const int r = i / (NP * 4), group = i % (NP * 4), col = 16 * (group / 4) + 4 * (group % 4);
    if (RAGGED && col >= w) continue;
    finish(c + r * ldc + col, acc[i], bias ? bias + col : nullptr, epilogue, RAGGED ? w - col : 4);
  }
}

// Rows [0, M) of one panel, in row blocks of up to 6.
template <bool RAGGED>
void rows_of(float* c, long ldc, const float* a, long lda, const float* b, long ldb, long M, long K,
             const float* bias, Epilogue epilogue, long w) {
  long r = 0;
  for (; r + 6 <= M; r += 6) tile<6, 1, RAGGED>(c + r * ldc, ldc, a + r * lda, lda, b, ldb, 0, K, bias, epilogue, w);
  float* cr = c + r * ldc;
  const float* ar = a + r * lda;
  switch (M - r) {
    case 5: tile<5, 1, RAGGED>(cr, ldc, ar, lda, b, ldb, 0, K, bias, epilogue, w); break;
    case 4: tile<4, 1, RAGGED>(cr, ldc, ar, lda, b, ldb, 0, K, bias, epilogue, w); break;
    case 3: tile<3, 1, RAGGED>(cr, ldc, ar, lda, b, ldb, 0, K, bias, epilogue, w); break;
    case 2: tile<2, 1, RAGGED>(cr, ldc, ar, lda, b, ldb, 0, K, bias, epilogue, w); break;
    case 1: tile<1, 1, RAGGED>(cr, ldc, ar, lda, b, ldb, 0, K, bias, epilogue, w); break;
    default: break;
  }
}

// Few rows: several panels per pass so that enough FMA chains and loads are in flight.
void skinny(float* c, long ldc, const float* a, long lda, const float* b, long ldb, long panel_stride, long M,
            long K, const float* bias, Epilogue epilogue, long full_panels) {
  long p = 0;
  const auto at = [&](long panel) { return b + panel * panel_stride; };
  const auto bias_at = [&](long panel) { return bias ? bias + 16 * panel : nullptr; };
  if (M == 1)
    for (; p + 4 <= full_panels; p += 4)
      tile<1, 4, false>(c + 16 * p, ldc, a, lda, at(p), ldb, panel_stride, K, bias_at(p), epilogue, 16);
  for (; p + 2 <= full_panels; p += 2) {
    if (M == 2)
      tile<2, 2, false>(c + 16 * p, ldc, a, lda, at(p), ldb, panel_stride, K, bias_at(p), epilogue, 16);
    else
      tile<1, 2, false>(c + 16 * p, ldc, a, lda, at(p), ldb, panel_stride, K, bias_at(p), epilogue, 16);
  }
  for (; p < full_panels; ++p) rows_of<false>(c + 16 * p, ldc, a, lda, at(p), ldb, M, K, bias_at(p), epilogue, 16);
}

// Sum of the four lanes, in a fixed order.
inline float hsum4(float32x4_t v) { return vaddvq_f32(v); }

// One MR x NR block of dot products: a rows against b rows, 4 lanes per pair, the ragged end
// of K through zero-padded copies, lanes summed in a fixed order.
template <int MR, int NR>
void nt_tile(float* out, long ldo, const float* a, long lda, const float* b, long ldb, long K, float scale) {
  float32x4_t acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = vdupq_n_f32(0.0f);
  long k = 0;
  for (; k + 4 <= K; k += 4) {
    float32x4_t bv[NR];
    for (int j = 0; j < NR; ++j) bv[j] = vld1q_f32(b + j * ldb + k);
    for (int i = 0; i < MR; ++i) {
      const float32x4_t av = vld1q_f32(a + i * lda + k);
      for (int j = 0; j < NR; ++j) acc[i][j] = vfmaq_f32(acc[i][j], av, bv[j]);
    }
  }
  if (k < K) {
    float32x4_t bv[NR];
    for (int j = 0; j < NR; ++j) bv[j] = load_tail(b + j * ldb + k, K - k);
    for (int i = 0; i < MR; ++i) {
      const float32x4_t av = load_tail(a + i * lda + k, K - k);
      for (int j = 0; j < NR; ++j) acc[i][j] = vfmaq_f32(acc[i][j], av, bv[j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) out[i * ldo + j] = hsum4(acc[i][j]) * scale;
}

template <int MR>
void nt_rows(float* out, long ldo, const float* a, long lda, const float* b, long ldb, long N, long K, float scale) {
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
      rows_of<false>(c + 16 * p, ldc, a, lda, b + p * panel_stride, ldb, M, K, bias ? bias + 16 * p : nullptr,
                     epilogue, 16);
  }
  if (w > 0) {
    const long p = full_panels;
    rows_of<true>(c + 16 * p, ldc, a, lda, b + p * panel_stride, packed ? w : ldb, M, K,
                  bias ? bias + 16 * p : nullptr, epilogue, w);
  }
}

void gemm_nt(float* out, std::int64_t ldo, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
             std::int64_t M, std::int64_t N, std::int64_t K, float scale) {
  // Rows of a in fours: 4 x 4 accumulators + 4 b rows + 1 a row = 21 of the 32 registers.
  long i = 0;
  for (; i + 4 <= M; i += 4) nt_rows<4>(out + i * ldo, ldo, a + i * lda, lda, b, ldb, N, K, scale);
  switch (M - i) {
    case 3: nt_rows<3>(out + i * ldo, ldo, a + i * lda, lda, b, ldb, N, K, scale); break;
    case 2: nt_rows<2>(out + i * ldo, ldo, a + i * lda, lda, b, ldb, N, K, scale); break;
    case 1: nt_rows<1>(out + i * ldo, ldo, a + i * lda, lda, b, ldb, N, K, scale); break;
    default: break;
  }
}

}  // namespace kael::kernels::neon
