// Element-wise kernels: GELU (forward and backward), the residual add and dropout's mask.
#pragma once

#include <cstdint>

#include "kernels/random.hpp"

namespace kael::kernels {

// out (n) = gelu_new(inp): 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + c x^3), the tanh form GPT-2
// uses (Hugging Face's "gelu_new", torch's gelu(approximate="tanh"); its constants and scalar
// form: family/scalar_math.hpp). out may equal inp.
void gelu_new(float* out, const float* inp, std::int64_t n);
// dinp (n) = gelu_new'(inp) * dout, the derivative of the tanh form. dinp may equal dout.
void gelu_backward(float* dinp, const float* inp, const float* dout, std::int64_t n);

// out (n) = gelu(inp), the exact form 0.5 x (1 + erf(x / sqrt(2))) (torch's default), on the
// calling thread, on the active table's vector loops (family/gelu_erf.hpp: erf by Abramowitz and
// Stegun 7.1.26, |error| < 1.5e-7, the formula of torch's vectorized CPU GELU, so very negative
// x keep their relative accuracy). out may equal inp.
void gelu_erf_rows(float* out, const float* inp, std::int64_t n);
// dinp (n) = dout * (Phi(x) + x phi(x)), the exact form's derivative, on the calling thread.
void gelu_erf_backward_rows(float* dinp, const float* inp, const float* dout, std::int64_t n);

// x (n) += y (n): the residual connection, on the calling thread.
void add_inplace(float* x, const float* y, std::int64_t n);
// out (n) = x (n) + y (n), one pass over the three on the pool's threads (out may be x):
// autograd adds gradients with it.
void add(float* out, const float* x, const float* y, std::int64_t n);

// x (n) *= factor on the pool's threads: the gradients' clipping.
void scale(float* x, float factor, std::int64_t n);

// x (n) *= mask.factor(i): dropout in place on the pool's threads, forward or backward (the
// same mask drops the same elements). Nothing to do when the mask is inactive.
void dropout(float* x, const DropoutMask& mask, std::int64_t n);

namespace ref {
void gelu_new(float* out, const float* inp, std::int64_t n);
void gelu_backward(float* dinp, const float* inp, const float* dout, std::int64_t n);  // in double, rounded once
void add_inplace(float* x, const float* y, std::int64_t n);
void gelu_erf(float* out, const float* inp, std::int64_t n);  // std::erf in double, rounded once
void gelu_erf_backward(float* dinp, const float* inp, const float* dout, std::int64_t n);
}  // namespace ref

}  // namespace kael::kernels
