// batch_norm, group_norm (tensor/normalization.hpp) and feature_dropout (tensor/conv.hpp),
// composed of the differentiable ops.
#include "kael/tensor/normalization.hpp"

#include <string>

#include "kael/core/error.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/conv.hpp"
#include "kael/tensor/ops.hpp"

namespace kael {

namespace {

// (1, C, 1, ...) for a per-channel tensor against an input of `dims` dims.
Tensor per_channel(const Tensor& t, int dims) {
  Shape shape(static_cast<std::size_t>(dims), 1);
  shape[1] = t.numel();
  return t.reshape(shape);
}

void check_channels(const char* op, const Tensor& t, const char* what, std::int64_t C) {
  if (t.defined() && (t.dim() != 1 || t.shape()[0] != C))
    throw ValueError(str(op, ": ", what, " must have shape (", C, "), got ", shape_to_string(t.shape())));
}

}  // namespace

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  const char* op = "batch_norm";
  if (input.dim() < 2) throw ValueError(str(op, ": expected an input of 2 or more dims (N, C, ...), got ",
                                            shape_to_string(input.shape())));
  if (!is_floating(input.dtype())) throw TypeError(str(op, ": needs a floating input, got ", dtype_name(input.dtype())));
  const std::int64_t C = input.shape()[1];
  check_channels(op, running_mean, "running_mean", C);
  check_channels(op, running_var, "running_var", C);
  check_channels(op, weight, "weight", C);
  check_channels(op, bias, "bias", C);
  const int dims = input.dim();
  std::vector<int> over{0};
  for (int d = 2; d < dims; ++d) over.push_back(d);
  Tensor mean_c, var_c;
  if (training) {
    const std::int64_t count = input.numel() / std::max<std::int64_t>(C, 1);
    if (count <= 1)
      throw ValueError(str(op, ": expected more than 1 value per channel when training, got input size ",
                           shape_to_string(input.shape())));
    mean_c = mean(input, over);
    var_c = var(input, over, false, 0);
    if (running_mean.defined() || running_var.defined()) {
      autograd::NoGradGuard no_grad;
      Tensor rm = running_mean, rv = running_var;
      if (rm.defined()) rm.copy_(add(mul(rm, 1.0 - momentum), mul(mean_c.detach().to(rm.dtype()), momentum)));
      if (rv.defined()) {
        const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
        rv.copy_(add(mul(rv, 1.0 - momentum), mul(var_c.detach().to(rv.dtype()), momentum * unbias)));
      }
    }
  } else {
    if (!running_mean.defined() || !running_var.defined())
      throw ValueError(str(op, ": running_mean and running_var are needed outside training"));
    mean_c = running_mean;
    var_c = running_var;
  }
  Tensor out = mul(sub(input, per_channel(mean_c, dims)), per_channel(rsqrt(add(var_c, eps)), dims));
  if (weight.defined()) out = mul(out, per_channel(weight, dims));
  if (bias.defined()) out = add(out, per_channel(bias, dims));
  return out;
}

Tensor group_norm(const Tensor& input, std::int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps) {
  const char* op = "group_norm";
  if (input.dim() < 2) throw ValueError(str(op, ": expected an input of 2 or more dims (N, C, ...), got ",
                                            shape_to_string(input.shape())));
  if (!is_floating(input.dtype())) throw TypeError(str(op, ": needs a floating input, got ", dtype_name(input.dtype())));
  const std::int64_t N = input.shape()[0], C = input.shape()[1];
  if (num_groups <= 0 || C % num_groups != 0)
    throw ValueError(str(op, ": ", C, " channels do not split into num_groups ", num_groups));
  check_channels(op, weight, "weight", C);
  check_channels(op, bias, "bias", C);
  const Tensor grouped = input.reshape({N, num_groups, -1});
  const Tensor centered = sub(grouped, mean(grouped, {2}, true));
  Tensor out = mul(centered, rsqrt(add(var(grouped, {2}, true, 0), eps))).reshape(input.shape());
  if (weight.defined()) out = mul(out, per_channel(weight, input.dim()));
  if (bias.defined()) out = add(out, per_channel(bias, input.dim()));
  return out;
}

Tensor feature_dropout(const Tensor& input, double p, bool training, int batched_dims) {
  const std::string op = str("dropout", batched_dims - 2, "d");
  if (batched_dims < 3) throw ValueError(str("feature_dropout: batched_dims must be at least 3, got ", batched_dims));
  if (!(p >= 0.0 && p <= 1.0)) throw ValueError(str(op, ": p must be in [0, 1], got ", p));
  if (input.dim() != batched_dims && input.dim() != batched_dims - 1)
    throw ValueError(str(op, ": expected a ", batched_dims - 1, "-D or ", batched_dims, "-D input, got ",
                         shape_to_string(input.shape())));
  if (!training || p == 0.0) return input;
  // One draw per (sample, channel), broadcast over the rest.
  const int channel_dims = input.dim() == batched_dims ? 2 : 1;
  Shape mask_shape(input.shape().begin(), input.shape().begin() + channel_dims);
  mask_shape.resize(static_cast<std::size_t>(input.dim()), 1);
  if (p == 1.0) return mul(input, zeros(mask_shape, input.dtype()));
  const Tensor keep = ge(rand(mask_shape, DType::F64), full({}, p, DType::F64)).to(input.dtype());
  return mul(input, mul(keep, 1.0 / (1.0 - p)));
}

}  // namespace kael
