// The AVX-512 table: on top of the AVX2 one (kernel_table.hpp), the zmm kernels of this
// folder; gemm_nt and the activation quantizer stay AVX2's. LayerNorm is the shared lane loop
// compiled here (same bits as the other sets). Without AVX512-VNNI (Skylake-SP, or
// KAEL_VNNI=0) the int8 GEMM stays the AVX2 one.
#include "kernels/avx512/kernels.hpp"
#include "kernels/exp.hpp"
#include "kernels/kernel_table.hpp"
#include "kernels/layernorm_row.hpp"
#include "kernels/sum.hpp"

namespace kael::kernels::avx512 {

void fill(KernelTable& table, const CpuFeatures& cpu) {
  table.gemm_panels = gemm_panels;
  table.gemm_panels_at = gemm_panels_at;
  table.dequantize_f16_panel = dequantize_f16_panel;
  table.f16_gemv = f16_gemv;
  if (cpu.avx512_vnni) {
    table.int8_gemm = int8_gemm_vnni;
    table.int8_dot = "avx512-vnni";
  }
  table.attend_head = attend_head;
  table.softmax = softmax;
  table.gelu_new = gelu_new;
  table.exp = exp;
  table.sigmoid = sigmoid;
  table.tanh = tanh;
  table.sum = sum;
  table.layernorm_row = layernorm_row_lanes;
  table.gelu_backward = gelu_backward;
  table.adamw_update = adamw_update;
  table.sum_of_squares = sum_of_squares;
}

}  // namespace kael::kernels::avx512
