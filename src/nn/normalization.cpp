// BatchNorm1d / BatchNorm2d and GroupNorm (nn/normalization.hpp).
#include "kael/nn/normalization.hpp"

#include "kael/core/error.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/normalization.hpp"
#include "kael/tensor/ops.hpp"

namespace kael::nn {

BatchNorm::BatchNorm(std::string layer_name, int input_dims_low, int input_dims_high, std::int64_t features,
                     double epsilon, double m, bool affine, bool track_running_stats)
    : num_features(features), eps(epsilon), momentum(m), layer_name_(std::move(layer_name)),
      dims_low_(input_dims_low), dims_high_(input_dims_high) {
  if (features <= 0) throw ValueError(str(layer_name_, ": num_features must be positive, got ", features));
  if (affine) {
    weight = register_parameter("weight", ones({features}));
    bias = register_parameter("bias", zeros({features}));
  }
  if (track_running_stats) {
    running_mean = register_buffer("running_mean", zeros({features}));
    running_var = register_buffer("running_var", ones({features}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, DType::I64));
  }
}

Tensor BatchNorm::forward(const Tensor& x) {
  if (x.dim() < dims_low_ || x.dim() > dims_high_)
    throw ValueError(str(layer_name_, ": expected a ", dims_low_, dims_low_ == dims_high_ ? "" : str(" or ", dims_high_),
                         "-D input, got ", shape_to_string(x.shape())));
  const bool training = is_training();
  if (training && num_batches_tracked.defined()) {
    autograd::NoGradGuard no_grad;
    num_batches_tracked += 1.0;
  }
  // Batch statistics in training, and whenever there are no running ones.
  const bool use_batch = training || !running_mean.defined();
  return batch_norm(x, running_mean, running_var, weight, bias, use_batch, momentum, eps);
}

GroupNorm::GroupNorm(std::int64_t groups, std::int64_t num_channels, double epsilon, bool affine)
    : num_groups(groups), eps(epsilon) {
  if (groups <= 0 || num_channels <= 0 || num_channels % groups != 0)
    throw ValueError(str("GroupNorm: num_channels ", num_channels, " must be divisible by num_groups ", groups));
  if (affine) {
    weight = register_parameter("weight", ones({num_channels}));
    bias = register_parameter("bias", zeros({num_channels}));
  }
}

Tensor GroupNorm::forward(const Tensor& x) { return group_norm(x, num_groups, weight, bias, eps); }

}  // namespace kael::nn
