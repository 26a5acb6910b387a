// The tensor library's float sum, the KernelTable entry `sum`: x (n) summed in double in one
// order whatever the set. Element i goes to lane i mod 32, each lane adds in index order from
// +0, and the 32 lanes are then added in order. (A float is exact in double, so the order
// alone decides the bits; 32 lanes keep four AVX-512 or eight AVX2 accumulators in flight, so
// the loop is bound by memory, not by the latency of one add.)
#pragma once

#include <cstdint>

#include "kernels/dispatch/kernel_table.hpp"

namespace kael::kernels {

namespace ref {
// Sequentially, in long double.
double sum(const float* x, std::int64_t n);
}  // namespace ref

// The portable table's entry; the vector sets' is kernels/family/rows.hpp's.
namespace portable {
SumFn sum;
}  // namespace portable

}  // namespace kael::kernels
