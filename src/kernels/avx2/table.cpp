// The AVX2 table: every entry from this folder; LayerNorm is the shared lane loop compiled
// here with AVX2 (the same bits as the portable one, twice the lanes per instruction).
#include "kernels/avx2/kernels.hpp"
#include "kernels/exp.hpp"
#include "kernels/kernel_table.hpp"
#include "kernels/layernorm_row.hpp"
#include "kernels/sum.hpp"

namespace kael::kernels::avx2 {

void fill(KernelTable& table, const CpuFeatures& cpu) {
  table.gemm_panels = gemm_panels;
  table.gemm_nt = gemm_nt;
  table.dequantize_f16_panel = dequantize_f16_panel;
  table.f16_gemv = f16_gemv;
  table.quantize_rows = quantize_rows;
  table.int8_gemm = cpu.avx_vnni ? int8_gemm_vnni : int8_gemm;
  table.int8_dot = cpu.avx_vnni ? "avx-vnni" : "pmaddubsw";
  table.softmax = softmax;
  table.gelu_new = gelu_new;
  table.exp = exp;
  table.sigmoid = sigmoid;
  table.tanh = tanh;
  table.sum = sum;
  table.layernorm_row = layernorm_row_lanes;
}

}  // namespace kael::kernels::avx2
