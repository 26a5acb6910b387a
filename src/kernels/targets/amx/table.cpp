// The amx table: on top of the avx512 one, the tile products of amx.hpp's formats (the
// avx512 set keeps their GEMVs and conversions, which the tiles read in the tiled layout).
#include "kernels/targets/amx/kernels.hpp"

namespace kael::kernels::amx {

void fill(KernelTable& table, const CpuFeatures& cpu) {
  if (cpu.amx_bf16 && table.gemm_bf16 != nullptr) {
    table.gemm_bf16 = gemm_bf16_tiles;
    table.gemm_bf16_tiled = true;
    table.gemm_bf16_kind = "amx-bf16";
  }
  if (table.int8c_gemv != nullptr) {  // AVX512-VNNI, for fewer rows than the tiles take
    table.int8c_tile_gemm = int8c_tile_gemm;
    table.int8_dot = "amx-int8 (avx512-vnni below 16 rows)";
  }
}

}  // namespace kael::kernels::amx
