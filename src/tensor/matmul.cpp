// matmul and linear. F32 products run on the kernel table's threaded GEMMs through f32_product
// (kernels::gemm, or kernels::gemm_bf16 at float32 matmul precision "medium"), reading
// transposed operands in place; other floating dtypes use a plain loop.
#include <algorithm>

#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "tensor/backward.hpp"
#include "tensor/device_matmul.hpp"
#include "tensor/f32_product.hpp"
#include "tensor/strided.hpp"

namespace kael {

using namespace tensor_detail;

namespace {

// A 2-D operand as the GEMM reads it: its rows `ld` elements apart, maybe transposed.
struct Operand {
  const float* data;
  std::int64_t ld;
  bool transposed;
};

// m (M, K) as the kernel can read it, or a contiguous copy of it.
Operand operand_of(const Tensor& m, Tensor& keep) {
  const auto& s = m.strides();
  if (s[1] == 1 && s[0] >= std::max<std::int64_t>(m.shape()[1], 1)) return {m.data<float>(), s[0], false};
  if (s[0] == 1 && s[1] >= std::max<std::int64_t>(m.shape()[0], 1)) return {m.data<float>(), s[1], true};
  keep = dense_copy(m);
  return {keep.data<float>(), std::max<std::int64_t>(m.shape()[1], 1), false};
}

// out (M, N) = a (M, K) @ b (K, N) (+ bias (N), a contiguous 1-D tensor, if defined), 2-D, same
// floating dtype. The bias is added to each sum once it is complete: the bits of adding it after.
void product_2d(Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias = {}) {
  const std::int64_t M = a.shape()[0], K = a.shape()[1], N = b.shape()[1];
  if (M == 0 || N == 0) return;
  if (a.dtype() == DType::F32) {
    Tensor ka, kb;
    const Operand oa = operand_of(a, ka), ob = operand_of(b, kb);
    f32_product(out.data<float>(), N, oa.data, oa.ld, oa.transposed, ob.data, ob.ld, ob.transposed, M, N, K,
                bias.defined() ? bias.data<float>() : nullptr);
    return;
  }
  dispatch(a.dtype(), [&]<class C>() {
    const auto ea = static_cast<std::int64_t>(a.element_size());
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t j = 0; j < N; ++j) {
        C acc{};
        for (std::int64_t k = 0; k < K; ++k)
          acc += load<C>(a.dtype(), a.raw_data() + (i * a.strides()[0] + k * a.strides()[1]) * ea) *
                 load<C>(b.dtype(), b.raw_data() + (k * b.strides()[0] + j * b.strides()[1]) * ea);
        if (bias.defined()) acc += load<C>(bias.dtype(), bias.raw_data() + j * ea);
        store(out.dtype(), out.raw_data() + (i * N + j) * ea, acc);
      }
  });
}

// a (..., M, K) @ b (..., K, N), batch dims broadcast, no autograd.
Tensor batched_product(const Tensor& a, const Tensor& b) {
  if (a.device().type != Device::Type::cpu || b.device().type != Device::Type::cpu) return device_batched_product(a, b);
  const Shape batch_a(a.shape().begin(), a.shape().end() - 2), batch_b(b.shape().begin(), b.shape().end() - 2);
  const Shape batch = broadcast_shapes(batch_a, batch_b, "matmul");
  const std::int64_t M = a.shape()[a.shape().size() - 2], N = b.shape().back();
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  Tensor out = Tensor::empty(a.dtype(), out_shape);
  Shape full_a = batch, full_b = batch;
  full_a.insert(full_a.end(), a.shape().end() - 2, a.shape().end());
  full_b.insert(full_b.end(), b.shape().end() - 2, b.shape().end());
  const Tensor ea = a.expand(full_a), eb = b.expand(full_b);
  const std::int64_t count = shape_numel(batch);
  std::vector<std::int64_t> index(batch.size(), 0);
  for (std::int64_t n = 0; n < count; ++n) {
    Tensor sa = ea, sb = eb, so = out;
    for (std::size_t d = 0; d < batch.size(); ++d) {
      sa = sa.select(0, index[d]);
      sb = sb.select(0, index[d]);
      so = so.select(0, index[d]);
    }
    product_2d(so, sa, sb);
    for (std::size_t d = batch.size(); d-- > 0;) {
      if (++index[d] < batch[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

}  // namespace

std::vector<Tensor> tensor_detail::matmul_backward(const Tensor& g, const Tensor& a, const Tensor& b, bool need_a,
                                                  bool need_b) {
  Tensor gb;
  if (need_b && a.dim() == 2 && b.dim() == 2 && b.strides()[0] == 1 && b.strides()[1] != 1) {
    // b is a transposed matrix (linear's weight.t()): its gradient a^T g taken as (g^T a)^T, so
    // that the product comes out in the weight's own layout and reaches weight.grad without a
    // transposing copy (MNIST's fc1, (128, 9216): 1.2M elements a step). The same sums; the
    // kernel reads g^T in place.
    gb = batched_product(g.transpose(0, 1), a).transpose(0, 1);
  } else if (need_b) {
    gb = sum_to(batched_product(a.transpose(-1, -2), g), b.shape());
  }
  return {need_a ? sum_to(batched_product(g, b.transpose(-1, -2)), a.shape()) : Tensor(), gb};
}

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  if (a_in.dim() == 0 || b_in.dim() == 0)
    throw ValueError(str("matmul: both operands need at least one dim, got shapes ", shape_to_string(a_in.shape()), " and ",
                         shape_to_string(b_in.shape())));
  if (!is_floating(a_in.dtype()) || a_in.dtype() != b_in.dtype() || a_in.dtype() == DType::F16 || a_in.dtype() == DType::BF16)
    throw TypeError(str("matmul: needs two F32 or two F64 tensors, got ", dtype_name(a_in.dtype()), " and ",
                        dtype_name(b_in.dtype())));
  // 1-D operands become matrices, and their added dim is removed from the result (torch.matmul).
  const bool vec_a = a_in.dim() == 1, vec_b = b_in.dim() == 1;
  const Tensor a = vec_a ? a_in.unsqueeze(0) : a_in;
  const Tensor b = vec_b ? b_in.unsqueeze(1) : b_in;
  const std::int64_t K = a.shape().back(), Kb = b.shape()[b.shape().size() - 2];
  if (K != Kb)
    throw ValueError(str("matmul: shapes ", shape_to_string(a_in.shape()), " and ", shape_to_string(b_in.shape()),
                         " cannot be multiplied (", K, " vs ", Kb, ")"));
  if (a.dim() > 2 && b.dim() == 2 && !vec_b) {
    // (..., M, K) @ (K, N) as torch folds it: one (... * M, K) @ (K, N) product rather than one
    // per batch index, each re-packing b, and a backward that sums a batch of b's gradients.
    Shape out_shape = a.shape();
    out_shape.back() = b.shape()[1];
    const std::int64_t rows = shape_numel(Shape(a.shape().begin(), a.shape().end() - 1));
    return matmul(a.reshape({rows, K}), b).reshape(std::move(out_shape));
  }
  Tensor out;
  {
    autograd::NoGradGuard inner;
    out = batched_product(a.detach(), b.detach());
  }
  if (autograd::any_requires_grad({&a, &b})) {
    autograd::SavedTensor sa(a), sb(b);
    const bool ga = a.requires_grad(), gb = b.requires_grad();
    out = autograd::record("matmul", std::move(out), {&a, &b}, [sa, sb, ga, gb](const Tensor& g) {
      return tensor_detail::matmul_backward(g, sa.get("matmul"), sb.get("matmul"), ga, gb);
    });
  }
  if (vec_a) out = out.squeeze(-2);
  if (vec_b) out = out.squeeze(-1);
  return out;
}

namespace {

// x (..., in) as the (rows, in) matrix the products read.
Tensor rows_of(const Tensor& x) {
  return x.reshape({shape_numel(Shape(x.shape().begin(), x.shape().end() - 1)), x.shape().back()});
}

// linear's own node (below) applies: matching F32 or F64 CPU operands, a 1-D bias if any.
bool fused_linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const DType dt = x.dtype();
  return (dt == DType::F32 || dt == DType::F64) && weight.dtype() == dt && x.device().type == Device::Type::cpu &&
         weight.device().type == Device::Type::cpu &&
         (!bias.defined() || (bias.dim() == 1 && bias.shape()[0] == weight.shape()[0] && bias.dtype() == dt &&
                              bias.device().type == Device::Type::cpu));
}

}  // namespace

std::vector<Tensor> tensor_detail::linear_backward(const Tensor& g, const Tensor& x, const Tensor& weight, bool need_x,
                                                  bool need_weight, bool need_bias) {
  const std::int64_t out_features = weight.shape()[0], in_features = weight.shape()[1];
  const Tensor g2 = rows_of(g);
  const std::int64_t rows = g2.shape()[0];
  Tensor dx, dw, db;
  if (need_x) {
    dx = Tensor::empty(g.dtype(), {rows, in_features});
    product_2d(dx, g2, weight);
    dx = dx.reshape(x.shape());
  }
  if (need_weight) {
    // g^T x straight into W's (out, in) layout, g read transposed in place: the product's
    // transpose would have to be copied into W's layout to be its gradient.
    dw = Tensor::empty(g.dtype(), {out_features, in_features});
    product_2d(dw, g2.transpose(0, 1), rows_of(x));
  }
  if (need_bias) db = sum_to(g, {out_features});
  return {dx, dw, db};
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (weight.dim() != 2)
    throw ValueError(str("linear: weight must be 2-D (out, in), got shape ", shape_to_string(weight.shape())));
  if (x.dim() == 0 || x.shape().back() != weight.shape()[1])
    throw ValueError(str("linear: input of shape ", shape_to_string(x.shape()), " does not match weight of shape ",
                         shape_to_string(weight.shape()), " (in features ", weight.shape()[1], ")"));
  if (!fused_linear(x, weight, bias)) {  // matmul's and add's checks and errors, their autograd
    Tensor y = matmul(x, weight.transpose(0, 1));
    return bias.defined() ? add(y, bias) : y;
  }
  // The values of matmul(x, weight^T) + bias, with one node whose backward makes the weight's
  // gradient in its own layout (linear_backward).
  Shape out_shape = x.shape();
  out_shape.back() = weight.shape()[0];
  Tensor y;
  {
    autograd::NoGradGuard inner;
    const Tensor x2 = rows_of(x.detach());
    Tensor y2 = Tensor::empty(x.dtype(), {x2.shape()[0], weight.shape()[0]});
    product_2d(y2, x2, weight.detach().transpose(0, 1), bias.defined() ? bias.detach().contiguous() : Tensor());
    y = y2.reshape(out_shape);
  }
  if (!autograd::any_requires_grad({&x, &weight, &bias})) return y;
  autograd::SavedTensor sx(x), sw(weight);
  const bool gx = x.requires_grad(), gw = weight.requires_grad(), gb = bias.defined() && bias.requires_grad();
  return autograd::record("linear", std::move(y), {&x, &weight, &bias}, [sx, sw, gx, gw, gb](const Tensor& g) {
    return tensor_detail::linear_backward(g, sx.get("linear"), sw.get("linear"), gx, gw, gb);
  });
}

}  // namespace kael
