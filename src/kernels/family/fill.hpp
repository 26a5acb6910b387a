// The table entries every vector target takes from the kernel families, instantiated for V's
// target: each target's table.cpp calls fill_families<Vec>, then adds what is its own.
// (gemm_nt is not here: the avx512 set keeps AVX2's, as it did before the families; a zmm copy
// would add its lanes in another order, and it has not been measured.)
#pragma once

#include <cstdint>

#include "kernels/family/attention.hpp"
#include "kernels/family/gemm.hpp"
#include "kernels/family/gelu_erf.hpp"
#include "kernels/family/gemv.hpp"
#include "kernels/family/rows.hpp"
#include "kernels/dispatch/kernel_table.hpp"

namespace kael::kernels::family {

template <class V>
void fill_families(KernelTable& table) {
  table.gemm_panels = gemm_panels<V>;
  table.gemm_panels_at = gemm_panels_at<V>;
  table.gemv_rows = gemv_rows<V>;
  table.transpose_panel = transpose_panel<V>;
  table.dequantize_f16_panel = dequantize_f16_panel<V>;
  table.f16_gemm = f16_gemm<V>;
  table.f16_gemm_rows = V::kBlockForCaches ? INT64_MAX : V::kTileRows;
  table.softmax = softmax_row<V>;
  table.gelu_new = gelu_row<V>;
  table.gelu_erf = gelu_erf_row<V>;
  table.gelu_erf_backward = gelu_erf_backward_row<V>;
  table.exp = exp_row<V>;
  table.sigmoid = sigmoid_row<V>;
  table.tanh = tanh_row<V>;
  table.sum = sum_row<V>;
  table.layer_norm_row = layer_norm_row<V>;
  table.attend_head = attend_head<V>;
  table.attend_row = attend_row<V>;
}

}  // namespace kael::kernels::family
