// Batch and group normalization layers of kael::nn, as torch.nn's (tensor/normalization.hpp).
#pragma once

#include <cstdint>

#include "kael/nn/module.hpp"

namespace kael::nn {

// weight (ones) and bias (zeros) of (num_features) when affine; buffers running_mean (zeros),
// running_var (ones) and num_batches_tracked (I64 0) when track_running_stats. In training
// the batch's statistics normalize and move the running ones by momentum; in eval() the running
// ones normalize. BatchNorm1d takes (N, C) or (N, C, L), BatchNorm2d (N, C, H, W).
class BatchNorm : public Module {
 public:
  BatchNorm(std::string layer_name, int input_dims_low, int input_dims_high, std::int64_t num_features,
            double eps, double momentum, bool affine, bool track_running_stats);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return layer_name_; }
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;
  std::int64_t num_features;
  double eps, momentum;

 private:
  std::string layer_name_;
  int dims_low_, dims_high_;
};

class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(std::int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = true,
                       bool track_running_stats = true)
      : BatchNorm("BatchNorm1d", 2, 3, num_features, eps, momentum, affine, track_running_stats) {}
};

class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(std::int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = true,
                       bool track_running_stats = true)
      : BatchNorm("BatchNorm2d", 4, 4, num_features, eps, momentum, affine, track_running_stats) {}
};

// Channels split into num_groups groups, each normalized per sample; weight (ones) and bias
// (zeros) of (num_channels) when affine.
class GroupNorm : public Module {
 public:
  GroupNorm(std::int64_t num_groups, std::int64_t num_channels, double eps = 1e-5, bool affine = true);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "GroupNorm"; }
  Tensor weight, bias;
  std::int64_t num_groups;
  double eps;
};

}  // namespace kael::nn
