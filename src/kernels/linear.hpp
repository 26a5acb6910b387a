// Matrix products of the model. Plain functions on raw pointers: outputs, then inputs, then
// sizes. Every matrix is dense row-major; pointers need only float alignment (weights may
// point into a file mapping). Outputs never alias inputs.
#pragma once

#include <cstdint>

namespace kael::kernels {

// out (T, OC) = inp (T, C) @ weight (C, OC) + bias (OC). The weight is input-major, as GPT-2's
// Conv1D stores it; bias may be null (zero). Each output is bias + the products summed in
// input order, so a row's result does not depend on T or on the thread count.
void linear(float* out, const float* inp, const float* weight, const float* bias, std::int64_t T, std::int64_t C,
            std::int64_t OC);

// out (T, N) = inp (T, C) @ weight^T for an output-major weight (N, C): the tied language-model
// head, whose weight is the token embedding table wte (vocab, C).
void linear_nt(float* out, const float* inp, const float* weight, std::int64_t T, std::int64_t C, std::int64_t N);

namespace ref {
void linear(float* out, const float* inp, const float* weight, const float* bias, std::int64_t T, std::int64_t C,
            std::int64_t OC);
void linear_nt(float* out, const float* inp, const float* weight, std::int64_t T, std::int64_t C, std::int64_t N);
}  // namespace ref

}  // namespace kael::kernels
