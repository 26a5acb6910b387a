// The NEON table: every entry from this folder but the activation quantizer (the portable
// one, which the compiler vectorizes; all sets give it equal bits) and LayerNorm, the shared
// lane loop compiled here (the same bits as the portable one on ARM64).
#include "kernels/kernel_table.hpp"
#include "kernels/layernorm_row.hpp"
#include "kernels/neon/kernels.hpp"

namespace kael::kernels::neon {

void fill(KernelTable& table, const CpuFeatures& cpu) {
  table.gemm_panels = gemm_panels;
  table.gemm_nt = gemm_nt;
  table.dequantize_f16_panel = dequantize_f16_panel;
  table.f16_gemv = f16_gemv;
  table.int8_gemm = cpu.dotprod ? int8_gemm_sdot : int8_gemm;
  table.int8_dot = cpu.dotprod ? "neon-sdot" : "neon-smull";
  table.softmax = softmax;
  table.gelu_new = gelu_new;
  table.layernorm_row = layernorm_row_lanes;
}

}  // namespace kael::kernels::neon
