// NEON kernels for F16 weights (quant.hpp): the conversion of one panel into F32 scratch
// (prefill, ragged panels), and the fused GEMV for 1-2 rows (decode), which widens 4 weights
// at a time in registers (FCVTL, exact) and feeds the FMAs directly, so the weights go from
// memory to the arithmetic without an F32 round trip. Both run the same ordered FMA chain as
// gemm_panels, so the fused and scratch paths give equal bits.
#include <arm_neon.h>

#include <cstring>

#include "kernels/neon/kernels.hpp"
#include "kernels/neon/math.hpp"

namespace kael::kernels::neon {
namespace {

// 4 weights starting at element i, as F32.
inline float32x4_t load4(const std::uint16_t* b, long i) {
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(b + i)));
}

// c (MR, 16 NP) for NP full panels starting at b (elements 16 K apart): MR * NP * 4 FMA
// chains over k, then bias and the epilogue as in gemm_panels.
template <int MR, int NP>
void fused_tile(float* c, long ldc, const float* a, long lda, const std::uint16_t* b, long K, const float* bias,
                Epilogue epilogue) {
  constexpr int kAcc = MR * NP * 4;
  float32x4_t acc[kAcc];
#pragma GCC unroll 16
  for (int i = 0; i < kAcc; ++i) acc[i] = vdupq_n_f32(0.0f);
  for (long k = 0; k < K; ++k) {
    float32x4_t row[NP * 4];
#pragma GCC unroll 16
    for (int i = 0; i < NP * 4; ++i) row[i] = load4(b, (i / 4) * 16 * K + k * 16 + 4 * (i % 4));
#pragma GCC unroll 2
    for (int r = 0; r < MR; ++r) {
      const float x = a[r * lda + k];
#pragma GCC unroll 16
      for (int i = 0; i < NP * 4; ++i) acc[r * NP * 4 + i] = vfmaq_n_f32(acc[r * NP * 4 + i], row[i], x);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < kAcc; ++i) {
    const int r = i / (NP * 4), group = i % (NP * 4), col = 16 * (group / 4) + 4 * (group % 4);
    finish(c + r * ldc + col, acc[i], bias ? bias + col : nullptr, epilogue);
  }
}

// One row: four panels per pass (16 accumulators, 16 loads); two rows: two panels (16 and 8).
template <int MR>
void fused_rows(float* c, long ldc, const float* a, long lda, const std::uint16_t* b, long panels, long K,
                const float* bias, Epilogue epilogue) {
  constexpr int kWide = MR == 1 ? 4 : 2;
  const auto bs = [&](long p) { return bias ? bias + 16 * p : nullptr; };
  long p = 0;
  for (; p + kWide <= panels; p += kWide)
    fused_tile<MR, kWide>(c + 16 * p, ldc, a, lda, b + p * 16 * K, K, bs(p), epilogue);
  for (; p < panels; ++p) fused_tile<MR, 1>(c + 16 * p, ldc, a, lda, b + p * 16 * K, K, bs(p), epilogue);
}

}  // namespace

void f16_gemv(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const std::uint16_t* b, std::int64_t M,
              std::int64_t panels, std::int64_t K, const float* bias, Epilogue epilogue) {
  for (std::int64_t r = 0; r < M; r += 2) {
    if (M - r >= 2)
      fused_rows<2>(c + r * ldc, ldc, a + r * lda, lda, b, panels, K, bias, epilogue);
    else
      fused_rows<1>(c + r * ldc, ldc, a + r * lda, lda, b, panels, K, bias, epilogue);
  }
}

void dequantize_f16_panel(float* dst, const std::uint16_t* h, std::int64_t K, std::int64_t w) {
  const std::int64_t n = K * w;
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const float16x8_t half = vreinterpretq_f16_u16(vld1q_u16(h + i));
    vst1q_f32(dst + i, vcvt_f32_f16(vget_low_f16(half)));
    vst1q_f32(dst + i + 4, vcvt_high_f32_f16(half));
  }
  for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, load4(h, i));
  if (i < n) {
    std::uint16_t tail[4] = {};
    std::memcpy(tail, h + i, static_cast<std::size_t>(n - i) * sizeof(std::uint16_t));
    store_tail(dst + i, load4(tail, 0), n - i);
  }
}

}  // namespace kael::kernels::neon
