// The CUDA target's operations (targets/cuda/), called by the tensor layer for tensors on a CUDA
// device. Plain C++ declarations; they are defined only in a build with the CUDA backend
// (KAEL_WITH_CUDA), and callers check that before calling. Pointers are device memory of
// cuda:`device`; each call queues its work on that device's stream and returns.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/binary_arith.hpp"
#include "kernels/optim_arith.hpp"
#include "kernels/unary_arith.hpp"

namespace kael::kernels::cuda {

// The most dims an elementwise walk takes after the tensor layer has merged the dims that
// are contiguous in every operand (tensor/strided.hpp, coalesce).
inline constexpr int kMaxDims = 8;

// An elementwise op over a shape in row-major order: the output is contiguous over `shape`, and
// input k reads element (i_0, ..., i_r-1) at sum of i_d * strides[k][d] elements from its start
// (a stride of 0 along a broadcast dim).
template <int N>
struct Walk {
  int rank = 0;
  std::int64_t shape[kMaxDims] = {};
  std::int64_t strides[N][kMaxDims] = {};
};

// The element types the device kernels read and write (bool is one byte, 0 or 1).
enum class Element { boolean, u8, i8, i16, i32, i64, f16, bf16, f32, f64 };

// out[i] = arith::binary(op, a at i, b at i, alpha) over walk (inputs 0 = a, 1 = b).
void binary_f32(int device, arith::Binary op, float* out, const float* a, const float* b, const Walk<2>& walk,
                std::int64_t n, float alpha);

// out[i] = arith::compare(op, a at i, b at i), 1 or 0.
void compare_f32(int device, arith::Compare op, std::uint8_t* out, const float* a, const float* b, const Walk<2>& walk,
                 std::int64_t n);

// out[i] = arith::unary(op, a at i).
void unary_f32(int device, arith::Unary op, float* out, const float* a, const Walk<1>& walk, std::int64_t n);

// out[i] = condition at i ? a at i : b at i (inputs 0 = condition, 1 = a, 2 = b).
void where_f32(int device, float* out, const std::uint8_t* condition, const float* a, const float* b,
               const Walk<3>& walk, std::int64_t n);

// out[i] = the element of `in` at i, converted from `from` to `to` as the CPU converts (through
// double for f64, int64 between integers, float otherwise; float to f16/bf16 rounds to nearest
// even; to bool is != 0).
void convert(int device, void* out, Element to, const void* in, Element from, const Walk<1>& walk, std::int64_t n);

// out[o] = the sum, in double, of `in` over the reduced walk from the kept walk's offset of o,
// stored as float: one output per kept element (n_out of them), each a block's tree.
void sum_f32(int device, float* out, const float* in, const Walk<1>& kept, std::int64_t n_out, const Walk<1>& reduced,
             std::int64_t n_reduced);

// values[o], indices[o] = the largest (or smallest) of the n elements step apart from the kept
// walk's offset of o, and its index among them, by torch's rule (a NaN wins; the first of equals).
void extreme_f32(int device, float* values, std::int64_t* indices, const float* in, const Walk<1>& kept,
                 std::int64_t n_out, std::int64_t step, std::int64_t n, bool largest);

// `batch` matrix products c = a b, row-major: a (m, k) with rows lda elements apart, or, when
// a_transposed, stored as its transpose (k, m) with rows lda apart; b (k, n) likewise; c (m, n)
// with rows ldc apart. Product i reads a + i * stride_a and b + i * stride_b (a stride of 0: the
// same matrix for every product) and writes c + i * stride_c.
struct Gemm {
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  const float* a = nullptr;
  std::int64_t lda = 0, stride_a = 0;
  bool a_transposed = false;
  const float* b = nullptr;
  std::int64_t ldb = 0, stride_b = 0;
  bool b_transposed = false;
  float* c = nullptr;
  std::int64_t ldc = 0, stride_c = 0;
};
// On cuBLAS (loaded on first use; an Error naming the cause where it cannot be), with TF32
// tensor cores only where allow_tf32. k must be at least 1.
void gemm_f32(int device, const Gemm& gemm, bool allow_tf32);

// The optimizers' updates of n float32 elements, each by optim_arith.hpp's rule: Adam's p, m, v
// (with L2 added to the gradient where adds_l2, the first moment lerped from its own end where
// lerp_low); SGD's p, and its momentum buffer where buf is not null (set from the step's
// direction where `first`).
void adam_f32(int device, float* p, const float* g, float* m, float* v, std::int64_t n,
              const arith::AdamConstants<float>& constants, bool adds_l2, bool lerp_low);
void sgd_f32(int device, float* p, const float* g, float* buf, bool first, std::int64_t n,
             const arith::SgdConstants<float>& constants);

// Every element of out (n elements of `element_size` bytes, 1, 2, 4 or 8) set to the bytes of `value`.
void fill(int device, void* out, std::size_t element_size, std::uint64_t value, std::int64_t n);

}  // namespace kael::kernels::cuda
