// The linear layer on a plain row-major weight (the model itself uses the packed forms of
// gemm.hpp). Plain functions on raw pointers: outputs, then inputs, then sizes; pointers need
// only float alignment. Outputs never alias inputs.
#pragma once

#include <cstdint>

namespace kael::kernels {

// out (T, OC) = inp (T, C) @ weight (C, OC) + bias (OC). The weight is input-major, as GPT-2's
// Conv1D stores it; bias may be null (zero). Each output is the products summed in input
// order, then the bias, so a row's result does not depend on T or on the thread count.
void linear(float* out, const float* inp, const float* weight, const float* bias, std::int64_t T, std::int64_t C,
            std::int64_t OC);

namespace ref {
void linear(float* out, const float* inp, const float* weight, const float* bias, std::int64_t T, std::int64_t C,
            std::int64_t OC);
}  // namespace ref

}  // namespace kael::kernels
