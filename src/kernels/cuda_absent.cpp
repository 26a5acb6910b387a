// The CUDA target's operations in a build without the CUDA backend: no tensor can be on a CUDA
// device there (core/cuda_runtime.cpp refuses to make one), so the tensor layer never calls
// these; each throws, as the runtime's own functions do in such a build.
#include "kernels/cuda.hpp"

#if !KAEL_WITH_CUDA

#include "kael/core/error.hpp"

namespace kael::kernels::cuda {

namespace {
[[noreturn]] void absent() { throw Error("this kael build runs on the CPU only"); }
}  // namespace

void binary_f32(int, arith::Binary, float*, const float*, const float*, const Walk<2>&, std::int64_t, float) { absent(); }
void compare_f32(int, arith::Compare, std::uint8_t*, const float*, const float*, const Walk<2>&, std::int64_t) { absent(); }
void unary_f32(int, arith::Unary, float*, const float*, const Walk<1>&, std::int64_t) { absent(); }
void where_f32(int, float*, const std::uint8_t*, const float*, const float*, const Walk<3>&, std::int64_t) { absent(); }
void convert(int, void*, Element, const void*, Element, const Walk<1>&, std::int64_t) { absent(); }
void sum_f32(int, float*, const float*, const Walk<1>&, std::int64_t, const Walk<1>&, std::int64_t) { absent(); }
void extreme_f32(int, float*, std::int64_t*, const float*, const Walk<1>&, std::int64_t, std::int64_t, std::int64_t,
                 bool) {
  absent();
}
void gemm_f32(int, const Gemm&, bool) { absent(); }
void adam_f32(int, float*, const float*, float*, float*, std::int64_t, const arith::AdamConstants<float>&, bool, bool) {
  absent();
}
void sgd_f32(int, float*, const float*, float*, bool, std::int64_t, const arith::SgdConstants<float>&) { absent(); }
void fill(int, void*, std::size_t, std::uint64_t, std::int64_t) { absent(); }

}  // namespace kael::kernels::cuda

#endif
