// The AVX2 table: the kernel families (kernels/family/) instantiated for this target's traits
// (avx2/vec.hpp), and this folder's int8 kernels.
#include "kernels/targets/avx2/kernels.hpp"
#include "kernels/targets/avx2/vec.hpp"
#include "kernels/family/fill.hpp"

namespace kael::kernels::avx2 {

void fill(KernelTable& table, const CpuFeatures& cpu) {
  family::fill_families<Vec>(table);
  fill_training(table);
  table.gemm_nt = family::gemm_nt<Vec>;
  table.quantize_rows = quantize_rows;
  table.int8_gemm = cpu.avx_vnni ? int8_gemm_vnni : int8_gemm;
  table.int8_dot = cpu.avx_vnni ? "avx-vnni" : "pmaddubsw";
}

}  // namespace kael::kernels::avx2
