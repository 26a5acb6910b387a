// e^x over a row of floats with the C library's semantics, for the tensor library's exp (and
// the ops built on it): exp(NaN) = NaN, exp(+inf) = +inf, exp(-inf) = 0, +inf past the largest
// float, subnormal results rounded as such and 0 below them, within 1 ulp of the correctly
// rounded value. (The GELU and softmax kernels' exp8/exp16 clamp instead: they never see such
// inputs.) The KernelTable entry `exp` (a RowFn: out (n) = e^inp, out may equal inp).
#pragma once

#include <cstdint>

#include "kernels/kernel_table.hpp"

namespace kael::kernels {

namespace ref {
// e^x in double, rounded once to float.
void exp(float* out, const float* inp, std::int64_t n);
}  // namespace ref

// The table entries; each set's unit defines its own.
namespace portable {
RowFn exp;
}
#if KAEL_X86_KERNELS
namespace avx2 {
RowFn exp;
}
namespace avx512 {
RowFn exp;
}
#endif

}  // namespace kael::kernels
