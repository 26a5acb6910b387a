// The convolution, pooling and reshaping layers of kael::nn, as torch.nn's: the same
// parameters, names, shapes and initialization (tensor/conv.hpp and tensor/pool.hpp hold the
// functions they call).
#pragma once

#include <cstdint>

#include "kael/nn/module.hpp"
#include "kael/tensor/conv.hpp"

namespace kael::nn {

// weight (out, in / groups, kH, kW) and bias (out), both uniform in +-1/sqrt(in / groups kH kW),
// as torch's kaiming_uniform_(a = sqrt(5)) and its bias rule give.
class Conv2d : public Module {
 public:
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, Size2 kernel_size, Size2 stride = {1, 1},
         Size2 padding = {0, 0}, Size2 dilation = {1, 1}, std::int64_t groups = 1, bool bias = true);
  Tensor forward(const Tensor& x) override;  // (N, in, H, W) -> (N, out, Ho, Wo)
  std::string name() const override { return "Conv2d"; }
  Tensor weight, bias;  // bias undefined without one
  Size2 stride, padding, dilation;
  std::int64_t groups;
};

// weight (out, in / groups, k), bias (out); Conv2d's initialization.
class Conv1d : public Module {
 public:
  Conv1d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel_size, std::int64_t stride = 1,
         std::int64_t padding = 0, std::int64_t dilation = 1, std::int64_t groups = 1, bool bias = true);
  Tensor forward(const Tensor& x) override;  // (N, in, L) -> (N, out, Lo)
  std::string name() const override { return "Conv1d"; }
  Tensor weight, bias;
  std::int64_t stride, padding, dilation, groups;
};

// max_pool2d with fixed options; stride {0, 0} means the kernel size.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(Size2 kernel_size, Size2 stride = {0, 0}, Size2 padding = {0, 0}, Size2 dilation = {1, 1},
                     bool ceil_mode = false);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "MaxPool2d"; }
  Size2 kernel_size, stride, padding, dilation;
  bool ceil_mode;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(Size2 kernel_size, Size2 stride = {0, 0}, Size2 padding = {0, 0}, bool ceil_mode = false,
                     bool count_include_pad = true);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "AvgPool2d"; }
  Size2 kernel_size, stride, padding;
  bool ceil_mode, count_include_pad;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(Size2 output_size);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "AdaptiveAvgPool2d"; }
  Size2 output_size;
};

// Dims start_dim..end_dim merged into one (torch.flatten).
class Flatten : public Module {
 public:
  explicit Flatten(int start_dim = 1, int end_dim = -1);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Flatten"; }
  int start_dim, end_dim;
};

// Whole channels zeroed with probability p while training (feature_dropout); the identity in eval().
class Dropout2d : public Module {
 public:
  explicit Dropout2d(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Dropout2d"; }
  double p;
};

}  // namespace kael::nn
