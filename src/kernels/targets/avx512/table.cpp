// The AVX-512 table: on top of the AVX2 one (kernel_table.hpp), the kernel families
// (kernels/family/) instantiated for this target's traits (avx512/vec.hpp) and this folder's
// kernels; gemm_nt and the activation quantizer stay AVX2's. Without AVX512-VNNI (Skylake-SP,
// or KAEL_VNNI=0) the int8 GEMM stays the AVX2 one. amx.hpp's formats get their tile-less
// kernels here (the per-column int8 GEMV, the BF16 conversions and GEMV); the amx set adds
// the tiles on top.
#include "kernels/targets/avx512/kernels.hpp"
#include "kernels/targets/avx512/vec.hpp"
#include "kernels/family/fill.hpp"

namespace kael::kernels::avx512 {

void fill(KernelTable& table, const CpuFeatures& cpu) {
  family::fill_families<Vec>(table);
  fill_training(table);
  if (cpu.avx512_vnni) {
    table.int8_gemm = int8_gemm_vnni;
    table.int8_dot = "avx512-vnni";
    table.int8c_quantize_rows = int8c_quantize_rows;
    table.int8c_gemv = int8c_gemv;
  }
  if (cpu.avx512_bf16) {
    table.bf16_pack_rows = bf16_pack_rows;
    table.bf16_pack_panels = bf16_pack_panels;
    table.bf16_pack_panels_sums = bf16_pack_panels_sums;
    table.bf16_pack_both = bf16_pack_both;
    table.gemm_bf16 = gemm_bf16_gemv;
    table.gemm_bf16_kind = "avx512-bf16";
  }
}

}  // namespace kael::kernels::avx512
