// Per-row normalizations: LayerNorm and softmax.
#pragma once

#include <cstdint>

namespace kael::kernels {

// out (T, C) = (inp - mean) / sqrt(var + eps) * weight + bias, per row, with the biased variance
// (torch.nn.LayerNorm). out may equal inp.
void layernorm(float* out, const float* inp, const float* weight, const float* bias, std::int64_t T, std::int64_t C,
               float eps);

// out (n) = softmax(inp), shifted by the maximum so no exp overflows. out may equal inp.
void softmax(float* out, const float* inp, std::int64_t n);

namespace ref {
void layernorm(float* out, const float* inp, const float* weight, const float* bias, std::int64_t T, std::int64_t C,
               float eps);
void softmax(float* out, const float* inp, std::int64_t n);
}  // namespace ref

}  // namespace kael::kernels
