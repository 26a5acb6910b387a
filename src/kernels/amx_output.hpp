// The one output rule of each amx.hpp format, shared by the tile kernels, the GEMVs and the
// references. Internal linkage on purpose: every unit (baseline or AVX-512) gets its own copy,
// so the linker never hands a baseline caller a copy built for wider registers.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/elementwise.hpp"
#include "kernels/gemm.hpp"

namespace kael::kernels {
namespace {

// int8 per column: the exact int32 dot, times both scales, plus the bias, rounded once.
[[maybe_unused]] float int8c_output(std::int32_t dot, float row_scale, float column_scale, float bias) {
  return std::fma(static_cast<float>(dot), row_scale * column_scale, bias);
}

// out (width) gets y (width, bias included) through the epilogue: the same GELU as the F32
// path (elementwise.hpp's dispatcher), the residual added last.
[[maybe_unused]] void finish_row(float* out, float* y, std::int64_t width, Epilogue epilogue) {
  if (epilogue == Epilogue::gelu) gelu_new(y, y, width);
  if (epilogue == Epilogue::residual) {
    for (std::int64_t j = 0; j < width; ++j) out[j] += y[j];
  } else {
    for (std::int64_t j = 0; j < width; ++j) out[j] = y[j];
  }
}

// y (width) = int8c_output of a row of dots; bias may be null.
[[maybe_unused]] void int8c_row(float* y, const std::int32_t* dot, float row_scale, const float* column_scales,
                                const float* bias, std::int64_t width) {
  if (bias != nullptr) {
    for (std::int64_t j = 0; j < width; ++j) y[j] = int8c_output(dot[j], row_scale, column_scales[j], bias[j]);
  } else {
    for (std::int64_t j = 0; j < width; ++j) y[j] = int8c_output(dot[j], row_scale, column_scales[j], 0.0f);
  }
}

// y (width) += bias, when there is one.
[[maybe_unused]] void add_bias(float* y, const float* bias, std::int64_t width) {
  if (bias != nullptr)
    for (std::int64_t j = 0; j < width; ++j) y[j] += bias[j];
}

}  // namespace
}  // namespace kael::kernels
