// Convolution, pooling, Flatten and Dropout2d layers (nn/conv.hpp).
#include "kael/nn/conv.hpp"

#include <cmath>
#include <functional>

#include "kael/core/error.hpp"
#include "kael/tensor/ops.hpp"
#include "kael/tensor/pool.hpp"
#include "nn/uniform.hpp"

namespace kael::nn {

namespace {

// torch's _ConvNd checks, then weight and bias drawn uniform in +-1/sqrt(fan_in).
void init_conv(const char* op, std::int64_t in, std::int64_t out, std::int64_t groups,
               const Shape& kernel, bool with_bias, Tensor& weight, Tensor& bias,
               const std::function<Tensor(std::string, Tensor)>& add) {
  if (in <= 0 || out <= 0) throw ValueError(str(op, ": channels must be positive, got in ", in, ", out ", out));
  if (groups <= 0) throw ValueError(str(op, ": groups must be a positive integer, got ", groups));
  if (in % groups != 0) throw ValueError(str(op, ": in_channels must be divisible by groups"));
  if (out % groups != 0) throw ValueError(str(op, ": out_channels must be divisible by groups"));
  std::int64_t fan_in = in / groups;
  for (std::int64_t k : kernel) {
    if (k <= 0) throw ValueError(str(op, ": kernel_size must be positive, got ", k));
    fan_in *= k;
  }
  Shape shape{out, in / groups};
  shape.insert(shape.end(), kernel.begin(), kernel.end());
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  weight = add("weight", detail::uniform(shape, bound));
  if (with_bias) bias = add("bias", detail::uniform({out}, bound));
}

}  // namespace

Conv2d::Conv2d(std::int64_t in_channels, std::int64_t out_channels, Size2 kernel_size, Size2 s, Size2 p, Size2 d,
               std::int64_t g, bool with_bias)
    : stride(s), padding(p), dilation(d), groups(g) {
  init_conv("Conv2d", in_channels, out_channels, groups, {kernel_size[0], kernel_size[1]}, with_bias, weight,
            bias, [this](std::string n, Tensor t) { return register_parameter(std::move(n), std::move(t)); });
}

Tensor Conv2d::forward(const Tensor& x) { return conv2d(x, weight, bias, stride, padding, dilation, groups); }

Conv1d::Conv1d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel_size, std::int64_t s,
               std::int64_t p, std::int64_t d, std::int64_t g, bool with_bias)
    : stride(s), padding(p), dilation(d), groups(g) {
  init_conv("Conv1d", in_channels, out_channels, groups, {kernel_size}, with_bias, weight, bias,
            [this](std::string n, Tensor t) { return register_parameter(std::move(n), std::move(t)); });
}

Tensor Conv1d::forward(const Tensor& x) { return conv1d(x, weight, bias, stride, padding, dilation, groups); }

MaxPool2d::MaxPool2d(Size2 k, Size2 s, Size2 p, Size2 d, bool ceil)
    : kernel_size(k), stride(s), padding(p), dilation(d), ceil_mode(ceil) {}

Tensor MaxPool2d::forward(const Tensor& x) { return max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode); }

AvgPool2d::AvgPool2d(Size2 k, Size2 s, Size2 p, bool ceil, bool include_pad)
    : kernel_size(k), stride(s), padding(p), ceil_mode(ceil), count_include_pad(include_pad) {}

Tensor AvgPool2d::forward(const Tensor& x) {
  return avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad);
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(Size2 size) : output_size(size) {}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) { return adaptive_avg_pool2d(x, output_size); }

Flatten::Flatten(int start, int end) : start_dim(start), end_dim(end) {}

Tensor Flatten::forward(const Tensor& x) {
  const int n = std::max(x.dim(), 1);
  const int start = start_dim < 0 ? start_dim + n : start_dim, end = end_dim < 0 ? end_dim + n : end_dim;
  if (start < 0 || start >= n || end < 0 || end >= n || start > end)
    throw IndexError(str("Flatten: dims ", start_dim, "..", end_dim, " are out of range for ", x.dim(), " dims"));
  if (x.dim() == 0) return x.reshape({1});
  Shape shape(x.shape().begin(), x.shape().begin() + start);
  std::int64_t merged = 1;
  for (int d = start; d <= end; ++d) merged *= x.shape()[static_cast<std::size_t>(d)];
  shape.push_back(merged);
  shape.insert(shape.end(), x.shape().begin() + end + 1, x.shape().end());
  return x.reshape(shape);
}

Dropout2d::Dropout2d(double probability) : p(probability) {
  if (!(p >= 0.0 && p <= 1.0)) throw ValueError(str("Dropout2d: p must be in [0, 1], got ", p));
}

Tensor Dropout2d::forward(const Tensor& x) { return feature_dropout(x, p, is_training()); }

}  // namespace kael::nn
