#include "tensor/device_matmul.hpp"

#include <algorithm>

#include "kael/tensor/ops.hpp"
#include "kael/tensor/precision.hpp"
#include "kernels/cuda.hpp"
#include "tensor/device_elementwise.hpp"

namespace kael::tensor_detail {

namespace {

// One operand of the batched product, as cuBLAS reads it: its first matrix, the rows' distance,
// whether it is stored transposed, and the distance between the batch's matrices.
struct Operand {
  Tensor keep;  // what `data` points into
  const float* data = nullptr;
  std::int64_t ld = 0, stride = 0;
  bool transposed = false;
};

// The batch dims of t (expanded to `batch`) as one stride, if they are one: all broadcast (0),
// or each the next one's extent apart. -1 where they are not.
std::int64_t batch_stride(const Tensor& t, std::size_t batch_dims) {
  std::int64_t stride = -1, count = 0;  // the innermost batch dim's stride; the matrices seen so far
  for (std::size_t d = batch_dims; d-- > 0;) {
    const std::int64_t extent = t.shape()[d], s = t.strides()[d];
    if (extent == 1) continue;
    if (stride == -1) {
      stride = s;
      count = extent;
    } else if (stride == 0 ? s != 0 : s != stride * count) {
      return -1;
    } else {
      count *= extent;
    }
  }
  return stride == -1 ? 0 : stride;
}

// t (batch..., rows, cols) as cuBLAS can read it, or a contiguous copy of it.
Operand operand_of(const Tensor& t, std::size_t batch_dims) {
  const std::size_t r = batch_dims;
  const std::int64_t rows = t.shape()[r], cols = t.shape()[r + 1];
  const std::int64_t s0 = t.strides()[r], s1 = t.strides()[r + 1];
  const std::int64_t stride = batch_stride(t, batch_dims);
  Operand o;
  if (stride >= 0 && (s1 == 1 || cols == 1) && s0 >= std::max<std::int64_t>(cols, 1)) {
    o.keep = t;
    o.ld = s0;
  } else if (stride >= 0 && (s0 == 1 || rows == 1) && s1 >= std::max<std::int64_t>(rows, 1)) {
    o.keep = t;
    o.ld = s1;
    o.transposed = true;
  } else {
    o.keep = t.contiguous();
    o.ld = std::max<std::int64_t>(cols, 1);
    o.stride = rows * cols;
    o.data = o.keep.device_data<float>();
    return o;
  }
  o.stride = stride;
  o.data = o.keep.device_data<float>();
  return o;
}

}  // namespace

Tensor device_batched_product(const Tensor& a, const Tensor& b) {
  check_same_device("matmul", a.device(), b.device());
  if (a.dtype() != DType::F32 || b.dtype() != DType::F32)
    throw Error(str("matmul on ", a.device().str(), " is implemented for float32 tensors only so far, got ",
                    dtype_name(a.dtype()), " and ", dtype_name(b.dtype())));
  const Shape batch_a(a.shape().begin(), a.shape().end() - 2), batch_b(b.shape().begin(), b.shape().end() - 2);
  const Shape batch = broadcast_shapes(batch_a, batch_b, "matmul");
  const std::int64_t M = a.shape()[a.shape().size() - 2], K = a.shape().back(), N = b.shape().back();
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  if (K == 0) return device_full(out_shape, 0.0, DType::F32, a.device());  // sums of nothing
  Tensor out = Tensor::empty(DType::F32, out_shape, a.device());
  Shape full_a = batch, full_b = batch;
  full_a.insert(full_a.end(), a.shape().end() - 2, a.shape().end());
  full_b.insert(full_b.end(), b.shape().end() - 2, b.shape().end());
  const Operand oa = operand_of(a.expand(full_a), batch.size()), ob = operand_of(b.expand(full_b), batch.size());
  kernels::cuda::Gemm gemm;
  gemm.m = M;
  gemm.n = N;
  gemm.k = K;
  gemm.batch = shape_numel(batch);
  gemm.a = oa.data;
  gemm.lda = oa.ld;
  gemm.stride_a = oa.stride;
  gemm.a_transposed = oa.transposed;
  gemm.b = ob.data;
  gemm.ldb = ob.ld;
  gemm.stride_b = ob.stride;
  gemm.b_transposed = ob.transposed;
  gemm.c = out.device_data<float>();
  gemm.ldc = std::max<std::int64_t>(N, 1);
  gemm.stride_c = M * N;
  kernels::cuda::gemm_f32(a.device().index, gemm, get_float32_matmul_precision() != "highest");
  return out;
}

}  // namespace kael::tensor_detail
