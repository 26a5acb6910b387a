// The AMX kernels (this folder, built with -mamx-tile -mamx-int8 -mamx-bf16 on top of the
// AVX-512 flags and -mavx512bf16): the tile products of amx.hpp's two formats, with the
// meanings of the KernelTable entries of the same types. Only fill(), the tests and
// bench/amx_speed refer to them; they may run only where isa_supported(Isa::amx), the BF16
// product only where CpuFeatures::amx_bf16. Each call loads the tile configuration on its
// thread when it starts and releases the tiles when it ends, so an idle thread holds no tile
// state.
#pragma once

#include "kernels/dispatch/kernel_table.hpp"

namespace kael::kernels::amx {

// Loads the tile configuration on this thread for its lifetime, then releases the tiles.
class AmxTiles {
 public:
  AmxTiles();
  ~AmxTiles();
  AmxTiles(const AmxTiles&) = delete;
  AmxTiles& operator=(const AmxTiles&) = delete;
};

Bf16GemmFn gemm_bf16_tiles;
Int8cGemmFn int8c_tile_gemm;

}  // namespace kael::kernels::amx
