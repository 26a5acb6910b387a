// Per-row normalizations: layer_norm (forward and backward) and softmax.
#pragma once

#include <cstdint>

namespace kael::kernels {

// out (T, C) = (inp - mean) * rstd * weight + bias per row, rstd = 1 / sqrt(var + eps) with the
// biased variance (torch.nn.functional.layer_norm over the last dim). weight and bias may be
// null (1 and 0). mean (T) and rstd (T), where not null, receive each row's, for
// layer_norm_backward. The row kernel is the table's (float sums in sixteen lanes, every set
// the same bits). out may equal inp.
void layer_norm(float* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias,
                std::int64_t T, std::int64_t C, float eps);
// The forward alone (the engine's), nothing saved.
void layer_norm(float* out, const float* inp, const float* weight, const float* bias, std::int64_t T, std::int64_t C,
                float eps);

// The gradients of layer_norm from dout (T, C), given the forward's inp, weight and saved mean
// and rstd: with xhat = (inp - mean) rstd and dxhat = dout weight,
//   dinp += rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)),
//   dweight += sum over rows of dout xhat,  dbias += sum over rows of dout.
// All three accumulate. weight may be null (1); dweight and dbias may be null (not wanted). Row
// sums in double; dweight and dbias summed in double per block of 32 rows, then the blocks in
// order: the same bits on any number of threads.
void layer_norm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                         const float* weight, const float* mean, const float* rstd, std::int64_t T, std::int64_t C);

// out (n) = softmax(inp), shifted by the maximum so no exp overflows. out may equal inp.
void softmax(float* out, const float* inp, std::int64_t n);

namespace ref {
// layer_norm and layer_norm_backward are templates in kernels/reference/layer_norm.hpp.
void softmax(float* out, const float* inp, std::int64_t n);
}  // namespace ref

}  // namespace kael::kernels
