// The AMX kernels of amx.hpp: 32 x 32 blocks of the output in four accumulator tiles (0-3),
// fed by two tiles of activation rows (4, 5) and two of weight panels (6, 7), 64 bytes of K per
// step (64 int8 or 32 BF16). The activations are padded to whole tiles of rows, so every tile
// is full and only the stores see ragged sizes.
#include <immintrin.h>

#include <algorithm>

#include "kernels/amx.hpp"
#include "kernels/elementwise.hpp"

namespace kael::kernels::amx {
namespace {

// The 64-byte LDTILECFG operand: palette 1, tiles 0-7 of 16 rows x 64 bytes.
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  std::uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

// Multiplies rows [m, m + 32) (or only [m, m + 16) when `half`) of the tiled activations a by
// the two weight panels w0, w1 over all of K, and stores the accumulators row-major into acc
// (32, 32). T is the element type: BF16 (uint16_t, 32 k per tile row) or int8 (64).
template <class T, class Acc>
void block_product(Acc* acc, const T* a, const T* w0, const T* w1, std::int64_t Kp, bool half) {
  constexpr std::int64_t kStep = 64 / sizeof(T);  // k per tile row
  _tile_zero(0);
  _tile_zero(1);
  if (half) {
    for (std::int64_t k = 0; k < Kp; k += kStep) {
      _tile_loadd(4, a + k * 16, 64);
      _tile_loadd(6, w0 + k * 16, 64);
      _tile_loadd(7, w1 + k * 16, 64);
      if constexpr (sizeof(T) == 2) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
      } else {
        _tile_dpbssd(0, 4, 6);
        _tile_dpbssd(1, 4, 7);
      }
    }
  } else {
    const T* a1 = a + 16 * Kp;
    _tile_zero(2);
    _tile_zero(3);
    for (std::int64_t k = 0; k < Kp; k += kStep) {
      _tile_loadd(4, a + k * 16, 64);
      _tile_loadd(5, a1 + k * 16, 64);
      _tile_loadd(6, w0 + k * 16, 64);
      _tile_loadd(7, w1 + k * 16, 64);
      if constexpr (sizeof(T) == 2) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      } else {
        _tile_dpbssd(0, 4, 6);
        _tile_dpbssd(1, 4, 7);
        _tile_dpbssd(2, 5, 6);
        _tile_dpbssd(3, 5, 7);
      }
    }
    _tile_stored(2, acc + 16 * 32, 128);
    _tile_stored(3, acc + 16 * 32 + 16, 128);
  }
  _tile_stored(0, acc, 128);
  _tile_stored(1, acc + 16, 128);
}

// Lanes [0, count) of 16, count clamped to 0..16.
__mmask16 lanes(std::int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xffff) : count <= 0 ? 0 : static_cast<__mmask16>((1u << count) - 1u);
}

// c (M, width of each block; ldc) from `blocks` 32-column blocks of w. Each block's
// accumulators become y (rows, 32) through rule(acc (16), row, col, mask), 16 outputs at a time,
// then the epilogue runs on the whole block: the vector form of epilogue.hpp's output rules and
// finish_row, operation for operation (equal bits to the GEMVs, which use those). The
// epilogue ran a scalar loop per output before, which cost more than the tile products.
template <class T, class Acc, class Rule>
void tile_gemm(float* c, std::int64_t ldc, const T* a, std::int64_t M, std::int64_t Kp, const T* w,
               std::int64_t blocks, std::int64_t n_valid, Epilogue epilogue, Rule rule) {
  alignas(64) Acc acc[32 * 32];
  alignas(64) float y[32 * 32];
  for (std::int64_t block = 0; block < blocks; ++block) {
    const T* w0 = w + block * 32 * Kp;
    const std::int64_t col = block * 32, width = std::min<std::int64_t>(32, n_valid - col);
    const __mmask16 mask[2] = {lanes(width), lanes(width - 16)};
    for (std::int64_t m = 0; m < M; m += 32) {
      block_product(acc, a + m * Kp, w0, w0 + 16 * Kp, Kp, M - m <= 16);
      const std::int64_t rows = std::min<std::int64_t>(32, M - m);
      for (std::int64_t r = 0; r < rows; ++r)
        for (int h = 0; h < 2; ++h) _mm512_store_ps(y + r * 32 + 16 * h, rule(acc + r * 32 + 16 * h, m + r, col + 16 * h, mask[h]));
      if (epilogue == Epilogue::gelu) gelu_new(y, y, rows * 32);  // the dispatcher finish_row calls
      for (std::int64_t r = 0; r < rows; ++r)
        for (int h = 0; h < 2; ++h) {
          float* out = c + (m + r) * ldc + col + 16 * h;
          __m512 v = _mm512_load_ps(y + r * 32 + 16 * h);
          if (epilogue == Epilogue::residual) v = _mm512_add_ps(_mm512_maskz_loadu_ps(mask[h], out), v);
          _mm512_mask_storeu_ps(out, mask[h], v);
        }
    }
  }
}

}  // namespace

AmxTiles::AmxTiles() {
  static const TileConfig config;
  _tile_loadconfig(&config);
}

AmxTiles::~AmxTiles() { _tile_release(); }

void bf16_tile_gemm(float* c, std::int64_t ldc, const std::uint16_t* a, std::int64_t M, std::int64_t Kp,
                    const std::uint16_t* w, std::int64_t blocks, std::int64_t n_valid, const float* bias,
                    Epilogue epilogue) {
  // add_bias: y = acc + bias, or acc alone.
  tile_gemm<std::uint16_t, float>(c, ldc, a, M, Kp, w, blocks, n_valid, epilogue,
                                  [&](const float* acc, std::int64_t, std::int64_t col, __mmask16 mask) {
                                    const __m512 v = _mm512_load_ps(acc);
                                    return bias ? _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, bias + col)) : v;
                                  });
}

void int8c_tile_gemm(float* c, std::int64_t ldc, const std::int8_t* a, const float* xs, std::int64_t M,
                     std::int64_t Kp, const std::int8_t* w, const float* scales, std::int64_t blocks,
                     std::int64_t n_valid, const float* bias, Epilogue epilogue) {
  // int8c_output: fma(float(dot), row scale x column scale, bias or 0).
  tile_gemm<std::int8_t, std::int32_t>(
      c, ldc, a, M, Kp, w, blocks, n_valid, epilogue,
      [&](const std::int32_t* acc, std::int64_t row, std::int64_t col, __mmask16 mask) {
        const __m512 dot = _mm512_cvtepi32_ps(_mm512_load_si512(acc));
        const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(xs[row]), _mm512_maskz_loadu_ps(mask, scales + col));
        const __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias + col) : _mm512_setzero_ps();
        return _mm512_fmadd_ps(dot, scale, b);
      });
}

}  // namespace kael::kernels::amx
