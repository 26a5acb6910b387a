// The one output rule of each amx.hpp format, shared by the tile kernels, the GEMVs and the
// references. Internal linkage on purpose: every unit (baseline or AVX-512) gets its own copy,
// so the linker never hands a baseline caller a copy built for wider registers.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/elementwise.hpp"
#include "kernels/gemm.hpp"

namespace kael::kernels::amx {
namespace {

// int8 per column: the exact int32 dot, times both scales, plus the bias, rounded once.
[[maybe_unused]] float int8c_output(std::int32_t dot, float row_scale, float column_scale, float bias) {
  return std::fma(static_cast<float>(dot), row_scale * column_scale, bias);
}

// out (width) gets y (width, bias included) through the epilogue: the same GELU as the F32
// path (elementwise.hpp's dispatcher), the residual added last.
[[maybe_unused]] void finish_row(float* out, float* y, std::int64_t width, Epilogue epilogue) {
  if (epilogue == Epilogue::gelu) gelu_new(y, y, width);
  for (std::int64_t j = 0; j < width; ++j) out[j] = epilogue == Epilogue::residual ? out[j] + y[j] : y[j];
}

}  // namespace
}  // namespace kael::kernels::amx
