// e^x over a row of floats with the C library's semantics, for the tensor library's exp (and
// the ops built on it): exp(NaN) = NaN, exp(+inf) = +inf, exp(-inf) = 0, +inf past the largest
// float, subnormal results rounded as such and 0 below them, within 1 ulp of the correctly
// rounded value. (The GELU and softmax kernels' exp8/exp16 clamp instead: they never see such
// inputs.) The KernelTable entry `exp` (a RowFn: out (n) = e^inp, out may equal inp).
//
// The tensor library's sigmoid and tanh are built on it, as the entries `sigmoid` and `tanh`
// (RowFns too), so that one pass over memory computes them:
//   sigmoid(x) = 1 / (1 + e^-x): 1 at +inf, 0 at -inf and below about -88 (where e^-x
//     overflows), NaN kept; within 2 ulp of the correctly rounded value above that;
//   tanh(x) as Cephes' tanhf: x + x^3 P(x^2) below |x| = 0.625, where 1 - 2 / (e^2|x| + 1)
//     would cancel, that above (1 at +inf), with x's sign (so tanh(-0) = -0), NaN kept; within
//     2 ulp of the correctly rounded value.
// Each set computes both forms of tanh for every element and picks one by a mask: a branch on
// the data would mispredict half the time.
#pragma once

#include <cstdint>

#include "kernels/dispatch/kernel_table.hpp"

namespace kael::kernels {

namespace ref {
// Each in double, rounded once to float.
void exp(float* out, const float* inp, std::int64_t n);
void sigmoid(float* out, const float* inp, std::int64_t n);
void tanh(float* out, const float* inp, std::int64_t n);
}  // namespace ref

// The portable table's entries; the vector sets' are kernels/family/rows.hpp's.
namespace portable {
RowFn exp, sigmoid, tanh;
}

}  // namespace kael::kernels
