// The AMX kernels of amx.hpp: 32 x 32 blocks of the output in four accumulator tiles (0-3),
// fed by two tiles of activation rows (4, 5) and two of weight panels (6, 7), 64 bytes of K per
// step (64 int8 or 32 BF16). The activations are padded to whole tiles of rows, so every tile
// is full and only the stores see ragged sizes.
#include <immintrin.h>

#include <algorithm>

#include "kernels/amx.hpp"
#include "kernels/targets/amx/kernels.hpp"
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

// The output rule of each format, in two steps: prepare(col, mask) loads what a 32-column
// block shares (column scales, bias), then row(acc (16), row, half) gives those 16 outputs of
// one row, bias included. The vector form of amx_output.hpp's rules, operation for operation
// (equal bits to the GEMVs, which use those).
struct Bf16Output {
  const float* bias;
  __m512 b[2];
  void prepare(std::int64_t col, const __mmask16* mask) {
    for (int h = 0; h < 2; ++h) b[h] = bias ? _mm512_maskz_loadu_ps(mask[h], bias + col + 16 * h) : _mm512_setzero_ps();
  }
  // add_bias: y = acc + bias, or acc alone.
  __m512 row(const float* acc, std::int64_t, int h) const {
    const __m512 v = _mm512_load_ps(acc);
    return bias ? _mm512_add_ps(v, b[h]) : v;
  }
};

struct Int8cOutput {
  const float* xs;  // row scales
  const float* scales;
  const float* bias;
  __m512 scale[2], b[2];
  void prepare(std::int64_t col, const __mmask16* mask) {
    for (int h = 0; h < 2; ++h) {
      scale[h] = _mm512_maskz_loadu_ps(mask[h], scales + col + 16 * h);
      b[h] = bias ? _mm512_maskz_loadu_ps(mask[h], bias + col + 16 * h) : _mm512_setzero_ps();
    }
  }
  // int8c_output: fma(float(dot), row scale x column scale, bias or 0).
  __m512 row(const std::int32_t* acc, std::int64_t row, int h) const {
    const __m512 dot = _mm512_cvtepi32_ps(_mm512_load_si512(acc));
    return _mm512_fmadd_ps(dot, _mm512_mul_ps(_mm512_set1_ps(xs[row]), scale[h]), b[h]);
  }
};

// c (rows from m, the 32 columns from col; ldc) from the accumulators of one block_product:
// the output rule, then the epilogue as the dispatcher finish_row calls (GELU over the whole
// block, the residual added last).
template <class Acc, class Output>
void store_block(float* c, std::int64_t ldc, const Acc* acc, std::int64_t m, std::int64_t rows, std::int64_t col,
                 std::int64_t n_valid, Epilogue epilogue, Output& output) {
  const std::int64_t width = std::min<std::int64_t>(32, n_valid - col);
  const __mmask16 mask[2] = {lanes(width), lanes(width - 16)};
  output.prepare(col, mask);
  if (epilogue == Epilogue::gelu) {
    alignas(64) float y[32 * 32];
    for (std::int64_t r = 0; r < rows; ++r)
      for (int h = 0; h < 2; ++h) _mm512_store_ps(y + r * 32 + 16 * h, output.row(acc + r * 32 + 16 * h, m + r, h));
    gelu_new(y, y, rows * 32);
    for (std::int64_t r = 0; r < rows; ++r)
      for (int h = 0; h < 2; ++h)
        _mm512_mask_storeu_ps(c + (m + r) * ldc + col + 16 * h, mask[h], _mm512_load_ps(y + r * 32 + 16 * h));
    return;
  }
  for (std::int64_t r = 0; r < rows; ++r)
    for (int h = 0; h < 2; ++h) {
      float* out = c + (m + r) * ldc + col + 16 * h;
      __m512 v = output.row(acc + r * 32 + 16 * h, m + r, h);
      if (epilogue == Epilogue::residual) v = _mm512_add_ps(_mm512_maskz_loadu_ps(mask[h], out), v);
      _mm512_mask_storeu_ps(out, mask[h], v);
    }
}

// Weight bytes a thread keeps in L2 (2 MiB per core on Sapphire/Emerald Rapids) while the
// row groups pass over them, leaving room for the activations and the outputs.
constexpr std::int64_t kL2WeightBytes = std::int64_t{1} << 20;

// c (M, width of each block; ldc) from `blocks` 32-column blocks of w, one 32 x 32 block
// product at a time. The blocks go in chunks of about kL2WeightBytes, and inside a chunk the
// column blocks run inside each 32-row group: the chunk's weights stay in L2 and the row
// group (24-96 KiB of activations) in L1, and the outputs are written row by row rather than
// 32 rows apart; the chunks keep BF16's twice larger weights, and one thread's whole matrix, in
// L2 as well (what this order measured: docs/performance.md, "The measurements behind the
// code's constants").
template <class T, class Acc, class Output>
void tile_gemm(float* c, std::int64_t ldc, const T* a, std::int64_t M, std::int64_t Kp, const T* w,
               std::int64_t blocks, std::int64_t n_valid, Epilogue epilogue, Output output) {
  alignas(64) Acc acc[32 * 32];
  const std::int64_t chunk = std::max<std::int64_t>(1, kL2WeightBytes / (32 * Kp * std::int64_t{sizeof(T)}));
  for (std::int64_t first = 0; first < blocks; first += chunk)
    for (std::int64_t m = 0; m < M; m += 32) {
      const std::int64_t rows = std::min<std::int64_t>(32, M - m);
      for (std::int64_t block = first; block < std::min(blocks, first + chunk); ++block) {
        const T* w0 = w + block * 32 * Kp;
        block_product(acc, a + m * Kp, w0, w0 + 16 * Kp, Kp, M - m <= 16);
        store_block(c, ldc, acc, m, rows, block * 32, n_valid, epilogue, output);
      }
    }
}

}  // namespace

AmxTiles::AmxTiles() {
  static const TileConfig config;
  _tile_loadconfig(&config);
}

AmxTiles::~AmxTiles() { _tile_release(); }

void gemm_bf16_tiles(float* c, std::int64_t ldc, const std::uint16_t* a, std::int64_t M, std::int64_t Kp,
                     const std::uint16_t* w, std::int64_t blocks, std::int64_t n_valid, const float* bias,
                     Epilogue epilogue) {
  const AmxTiles hold;
  tile_gemm<std::uint16_t, float>(c, ldc, a, M, Kp, w, blocks, n_valid, epilogue, Bf16Output{bias, {}});
}

void int8c_tile_gemm(float* c, std::int64_t ldc, const std::int8_t* a, const float* xs, std::int64_t M,
                     std::int64_t Kp, const std::int8_t* w, const float* scales, const std::int32_t* /*sums*/,
                     std::int64_t blocks, std::int64_t n_valid, const float* bias, Epilogue epilogue) {
  const AmxTiles hold;
  tile_gemm<std::int8_t, std::int32_t>(c, ldc, a, M, Kp, w, blocks, n_valid, epilogue,
                                       Int8cOutput{xs, scales, bias, {}, {}});
}

}  // namespace kael::kernels::amx
