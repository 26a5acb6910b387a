// The int8 GEMM of int8.hpp with AVX512-VNNI's vpdpbusd on zmm. One 64-byte k4 block of a
// panel (4 k of its 16 columns) is exactly one zmm, so one vpdpbusd adds four products to each
// of the 16 columns' int32 sums.
//
// vpdpbusd multiplies unsigned by signed bytes. Instead of moving the activation's sign onto
// the weights per row (AVX2's psignb), the activations are offset to u = x + 128 (0..255, one
// xor per byte, once per row block), and the offset is taken back once per group and column:
//   sum x w = sum u w - 128 sum w,
// with sum w over the group from one more vpdpbusd against bytes of 1: once per panel for all
// its row tiles where several read it (panel_terms), else inside the one tile. All exact in
// int32, so the group sums equal AVX2's; the float steps (one FMA per group with the two
// scales, the epilogue of family/math.hpp) are AVX2's too: equal bits.
// (The offsets make this dot step ISA-shaped; family/int8.hpp is the signed-activation one.)
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/targets/avx512/kernels.hpp"
#include "kernels/targets/avx512/vec.hpp"
#include "kernels/family/math.hpp"
#include "kernels/infra/aligned_vector.hpp"
#include "kernels/int8.hpp"

namespace kael::kernels::avx512 {
namespace {

constexpr long kGroup = kInt8Group;
constexpr long kBlocksPerGroup = kGroup / 4;
constexpr int kMaxRows = 8;

// A panel's per-group terms, shared by its row tiles: offset = 128 sum w over the group (16
// int32 from one vpdpbusd a k4 block against bytes of 1) and the 16 column scales as F32.
struct PanelTerms {
  AlignedVector<std::int32_t> offset;  // (groups, 16)
  AlignedVector<float> scale;          // (groups, 16)
};

void panel_terms(PanelTerms& t, const std::int8_t* w, const std::uint16_t* scales, long groups) {
  const __m512i ones = _mm512_set1_epi8(1);
  t.offset.resize(static_cast<std::size_t>(groups * 16));
  t.scale.resize(static_cast<std::size_t>(groups * 16));
  for (long g = 0; g < groups; ++g) {
    __m512i wsum = _mm512_setzero_si512();
    for (long b = 0; b < kBlocksPerGroup; ++b)
      wsum = _mm512_dpbusd_epi32(wsum, ones, _mm512_loadu_si512(w + (g * kBlocksPerGroup + b) * 64));
    _mm512_store_si512(t.offset.data() + g * 16, _mm512_slli_epi32(wsum, 7));
    _mm512_store_ps(t.scale.data() + g * 16, Vec::load_bf16(scales + g * 16));
  }
}

// c (MR, 16) for one panel: xu (MR rows, Kp apart) holds the offset activations. With `terms`
// (offsets and column_scales from panel_terms) the tile reads the per-group terms; without, it
// forms them itself: one vpdpbusd more a k4 block, but no second pass over the panel, which made
// one-row decode 15% slower.
template <int MR, bool kTerms>
void tile(float* c, long ldc, const std::uint8_t* xu, const float* xs, long Kp, const std::int8_t* w,
          const std::uint16_t* scales, const std::int32_t* offsets, const float* column_scales, long valid,
          const float* bias, Epilogue epilogue) {
  const long groups = Kp / kGroup;
  __m512 acc[MR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) acc[r] = _mm512_setzero_ps();
  for (long g = 0; g < groups; ++g) {
    __m512i dot[MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) dot[r] = _mm512_setzero_si512();
    __m512i wsum = _mm512_setzero_si512();
    const std::int8_t* wg = w + g * kBlocksPerGroup * 64;
#pragma GCC unroll 8
    for (long b = 0; b < kBlocksPerGroup; ++b) {
      const __m512i wv = _mm512_loadu_si512(wg + b * 64);
      if (!kTerms) wsum = _mm512_dpbusd_epi32(wsum, _mm512_set1_epi8(1), wv);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        std::int32_t four;
        std::memcpy(&four, xu + r * Kp + g * kGroup + b * 4, sizeof four);
        dot[r] = _mm512_dpbusd_epi32(dot[r], _mm512_set1_epi32(four), wv);
      }
    }
    const __m512i offset = kTerms ? _mm512_load_si512(offsets + g * 16) : _mm512_slli_epi32(wsum, 7);
    const __m512 scale = kTerms ? _mm512_load_ps(column_scales + g * 16) : Vec::load_bf16(scales + g * 16);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512 xscale = _mm512_set1_ps(xs[r * groups + g]);
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(dot[r], offset)), _mm512_mul_ps(xscale, scale),
                               acc[r]);
    }
  }
  const __mmask16 mask = Vec::tail(std::min<long>(16, valid));
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) family::finish<Vec, true>(c + r * ldc, acc[r], bias, epilogue, mask);
}

// One row (decode) against NP panels `spacing` panels apart, the first at w, its offsets formed
// as tile<1, false> forms them and its float steps the same: equal bits. Panels side by side
// would make each panel a stream of its own only 16 Kp bytes long; these streams run on from
// one call to the next (docs/performance.md, "Decode: panel streams that run on").
template <int NP>
void row_tile(float* c, const std::uint8_t* xu, const float* xs, long Kp, const std::int8_t* w,
              const std::uint16_t* scales, long spacing, long valid, const float* bias, Epilogue epilogue) {
  const long groups = Kp / kGroup;
  const long w_stride = spacing * 16 * Kp, scale_stride = spacing * groups * 16, c_stride = 16 * spacing;
  __m512 acc[NP];
#pragma GCC unroll 8
  for (int i = 0; i < NP; ++i) acc[i] = _mm512_setzero_ps();
  for (long g = 0; g < groups; ++g) {
    __m512i dot[NP], wsum[NP];
#pragma GCC unroll 8
    for (int i = 0; i < NP; ++i) dot[i] = wsum[i] = _mm512_setzero_si512();
    const std::int8_t* wg = w + g * kBlocksPerGroup * 64;
#pragma GCC unroll 8
    for (long b = 0; b < kBlocksPerGroup; ++b) {
      std::int32_t four;
      std::memcpy(&four, xu + g * kGroup + b * 4, sizeof four);
      const __m512i x = _mm512_set1_epi32(four);
#pragma GCC unroll 8
      for (int i = 0; i < NP; ++i) {
        const __m512i wv = _mm512_loadu_si512(wg + i * w_stride + b * 64);
        wsum[i] = _mm512_dpbusd_epi32(wsum[i], _mm512_set1_epi8(1), wv);
        dot[i] = _mm512_dpbusd_epi32(dot[i], x, wv);
      }
    }
    const __m512 xscale = _mm512_set1_ps(xs[g]);
#pragma GCC unroll 8
    for (int i = 0; i < NP; ++i) {
      const __m512 scale = Vec::load_bf16(scales + i * scale_stride + g * 16);
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(dot[i], _mm512_slli_epi32(wsum[i], 7))),
                               _mm512_mul_ps(xscale, scale), acc[i]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < NP; ++i)
    family::finish<Vec, true>(c + i * c_stride, acc[i], bias ? bias + i * c_stride : nullptr, epilogue,
                              Vec::tail(std::min<long>(16, valid - i * c_stride)));
}

// Rows [0, rows) of one panel in tiles of up to kMaxRows.
template <bool kTerms>
void panel_rows(float* c, long ldc, const std::uint8_t* xu, const float* xs, long rows, long Kp,
                const std::int8_t* w, const std::uint16_t* scales, const std::int32_t* offsets,
                const float* column_scales, long valid, const float* bias, Epilogue epilogue) {
  const long groups = Kp / kGroup;
  long r = 0;
  for (; r + kMaxRows <= rows; r += kMaxRows)
    tile<kMaxRows, kTerms>(c + r * ldc, ldc, xu + r * Kp, xs + r * groups, Kp, w, scales, offsets, column_scales,
                           valid, bias, epilogue);
  float* cr = c + r * ldc;
  const std::uint8_t* ur = xu + r * Kp;
  const float* sr = xs + r * groups;
  const auto rest = [&](auto height) {
    tile<decltype(height)::value, kTerms>(cr, ldc, ur, sr, Kp, w, scales, offsets, column_scales, valid, bias,
                                          epilogue);
  };
  switch (rows - r) {
    case 7: rest(std::integral_constant<int, 7>{}); break;
    case 6: rest(std::integral_constant<int, 6>{}); break;
    case 5: rest(std::integral_constant<int, 5>{}); break;
    case 4: rest(std::integral_constant<int, 4>{}); break;
    case 3: rest(std::integral_constant<int, 3>{}); break;
    case 2: rest(std::integral_constant<int, 2>{}); break;
    case 1: rest(std::integral_constant<int, 1>{}); break;
    default: break;
  }
}

}  // namespace

void int8_gemm_vnni(float* c, std::int64_t ldc, const std::int8_t* xq, const float* xs, std::int64_t M,
                    std::int64_t Kp, const std::int8_t* w, const std::uint16_t* scales, std::int64_t panels,
                    std::int64_t n_valid, const float* bias, Epilogue epilogue) {
  const long groups = Kp / kGroup;
  // Rows in blocks whose activations stay in L2 while every panel passes over them.
  const long block = std::max<long>(1, (1 << 18) / Kp);
  thread_local std::vector<std::uint8_t> xu;
  thread_local PanelTerms terms;
  xu.resize(static_cast<std::size_t>(std::min<long>(block, M) * Kp));
  for (long r0 = 0; r0 < M; r0 += block) {
    const long rows = std::min<long>(block, M - r0);
    // u = x + 128, as bytes: x xor 0x80.
    const std::int8_t* xb = xq + r0 * Kp;
    const long bytes = rows * Kp;  // a multiple of 32
    for (long i = 0; i < bytes; i += 32) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + i));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(xu.data() + i), _mm256_xor_si256(v, _mm256_set1_epi8(-128)));
    }
    const float* sb = xs + r0 * groups;
    float* cb = c + r0 * ldc;
    // Terms shared by the row tiles where more than one reads each panel.
    const bool shared = rows > kMaxRows;
    long p = 0;
    if (rows == 1) {  // decode: passes of kRowPanels panels a quarter of them apart
      constexpr int kRowPanels = 2;
      const long passes = panels / kRowPanels;
      for (; p < passes; ++p)
        row_tile<kRowPanels>(cb + 16 * p, xu.data(), sb, Kp, w + p * 16 * Kp, scales + p * groups * 16, passes,
                             n_valid - 16 * p, bias ? bias + 16 * p : nullptr, epilogue);
      p = passes * kRowPanels;
    }
    for (; p < panels; ++p) {
      const std::int8_t* wp = w + p * 16 * Kp;
      const std::uint16_t* sp = scales + p * groups * 16;
      float* cp = cb + 16 * p;
      const float* bp = bias ? bias + 16 * p : nullptr;
      const long valid = n_valid - 16 * p;
      if (shared) {
        panel_terms(terms, wp, sp, groups);
        panel_rows<true>(cp, ldc, xu.data(), sb, rows, Kp, wp, sp, terms.offset.data(), terms.scale.data(), valid,
                         bp, epilogue);
      } else {
        panel_rows<false>(cp, ldc, xu.data(), sb, rows, Kp, wp, sp, nullptr, nullptr, valid, bp, epilogue);
      }
    }
  }
}

}  // namespace kael::kernels::avx512
