// Neural-network functions, composed of the differentiable ops (so their gradients follow).
#include <cmath>

#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "tensor/strided.hpp"

namespace kael {

using namespace tensor_detail;

Tensor log_softmax(const Tensor& a, int dim) {
  const int at = wrap_dim(dim, a.dim(), "log_softmax");
  if (!is_floating(a.dtype())) throw TypeError(str("log_softmax: needs a floating tensor, got ", dtype_name(a.dtype())));
  // Shifting by the (constant) row maximum keeps exp finite; it does not change the result.
  const Tensor shift = max(a.detach(), at, true).first;
  const Tensor shifted = sub(a, shift);
  return sub(shifted, log(sum(exp(shifted), {at}, true)));
}

Tensor softmax(const Tensor& a, int dim) {
  const int at = wrap_dim(dim, a.dim(), "softmax");
  if (!is_floating(a.dtype())) throw TypeError(str("softmax: needs a floating tensor, got ", dtype_name(a.dtype())));
  const Tensor e = exp(sub(a, max(a.detach(), at, true).first));
  return div(e, sum(e, {at}, true));
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias, double eps) {
  const std::size_t n = normalized_shape.size();
  if (n == 0 || n > x.shape().size() || !std::equal(normalized_shape.begin(), normalized_shape.end(), x.shape().end() - static_cast<std::ptrdiff_t>(n)))
    throw ValueError(str("layer_norm: normalized_shape ", shape_to_string(normalized_shape),
                         " does not match the last dims of the input's shape ", shape_to_string(x.shape())));
  for (const Tensor* p : {&weight, &bias})
    if (p->defined() && p->shape() != normalized_shape)
      throw ValueError(str("layer_norm: weight and bias must have shape ", shape_to_string(normalized_shape), ", got ",
                           shape_to_string(p->shape())));
  std::vector<int> dims;
  for (std::size_t i = 0; i < n; ++i) dims.push_back(-1 - static_cast<int>(i));
  const Tensor mu = mean(x, dims, true);
  const Tensor centered = sub(x, mu);
  const Tensor variance = mean(mul(centered, centered), dims, true);  // biased, as layer_norm uses
  Tensor y = mul(centered, rsqrt(add(variance, eps)));
  if (weight.defined()) y = mul(y, weight);
  if (bias.defined()) y = add(y, bias);
  return y;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, std::int64_t ignore_index) {
  if (logits.dim() != 2 || target.dim() != 1 || target.shape()[0] != logits.shape()[0])
    throw ValueError(str("cross_entropy: expects logits (N, C) and target (N), got shapes ", shape_to_string(logits.shape()),
                         " and ", shape_to_string(target.shape())));
  if (!is_integral(target.dtype())) throw TypeError(str("cross_entropy: target must be integer class ids, got ", dtype_name(target.dtype())));
  const std::int64_t N = logits.shape()[0], C = logits.shape()[1];
  const Tensor ids = target.to(DType::I64).contiguous();
  const std::int64_t* t = ids.data<std::int64_t>();
  // The picked log-probabilities through a one-hot weight, so the gradient needs no new op.
  Tensor pick = Tensor::zeros(logits.dtype(), {N, C});
  std::int64_t counted = 0;
  for (std::int64_t i = 0; i < N; ++i) {
    if (t[i] == ignore_index) continue;
    if (t[i] < 0 || t[i] >= C)
      throw IndexError(str("cross_entropy: target ", t[i], " at position ", i, " out of range for ", C, " classes"));
    store(logits.dtype(), pick.raw_data() + (i * C + t[i]) * static_cast<std::int64_t>(pick.element_size()), 1.0);
    ++counted;
  }
  const Tensor total = neg(sum(mul(log_softmax(logits, 1), pick)));
  return div(total, static_cast<double>(counted));  // no counted target: NaN, as PyTorch
}

Tensor dropout(const Tensor& a, double p, bool training) {
  if (p < 0.0 || p > 1.0) throw ValueError(str("dropout: p must be in [0, 1], got ", p));
  if (!training || p == 0.0) return a;
  if (p == 1.0) return mul(a, zeros_like(a));
  const Tensor keep = ge(rand(a.shape(), DType::F64), full({}, p, DType::F64)).to(a.dtype());
  return mul(a, mul(keep, 1.0 / (1.0 - p)));
}

}  // namespace kael
