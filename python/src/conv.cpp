// kael.nn.functional's convolution, pooling and normalization functions with torch's
// signatures (an int or a pair for each 2-D option, padding "valid" / "same"), and the native
// convolution layers whose initialized parameters python/kael/nn/convolution.py takes.
// The products release the GIL.
#include <pybind11/stl.h>

#include <optional>

#include "bindings.hpp"
#include "convert.hpp"
#include "kael/core/error.hpp"
#include "kael/nn/conv.hpp"
#include "kael/tensor/conv.hpp"
#include "kael/tensor/normalization.hpp"
#include "kael/tensor/pool.hpp"

namespace py = pybind11;

namespace kael::python {

namespace {

// An int (both dims) or a sequence of `dims` ints (torch's _pair / _single).
std::vector<std::int64_t> sizes_arg(const py::handle& value, std::size_t dims, const char* op, const char* what) {
  const std::string name = str(op, ": ", what);
  if (!py::isinstance<py::sequence>(value)) return std::vector<std::int64_t>(dims, int64_arg(value, name));
  if (py::isinstance<py::str>(value))
    throw TypeError(str(name, " must be an int or a tuple of ", dims, " ints"));
  const auto seq = py::reinterpret_borrow<py::sequence>(value);
  if (seq.size() != dims) throw ValueError(str(name, " must have ", dims, " values, got ", seq.size()));
  std::vector<std::int64_t> out;
  for (const py::handle item : seq) out.push_back(int64_arg(item, name));
  return out;
}

Size2 size2_arg(const py::handle& value, const char* op, const char* what) {
  const auto v = sizes_arg(value, 2, op, what);
  return {v[0], v[1]};
}

std::int64_t size1_arg(const py::handle& value, const char* op, const char* what) {
  return sizes_arg(value, 1, op, what)[0];
}

// Padding as torch takes it: a number, a tuple, "valid" (none) or "same" (the output keeps the
// input's size; stride 1, and an even total padding, which this build pads on both sides).
Size2 padding_arg(const py::handle& value, const Tensor& weight, Size2 stride, Size2 dilation, int dims,
                  const char* op) {
  if (!py::isinstance<py::str>(value)) {
    if (dims == 1) return {0, size1_arg(value, op, "padding")};
    return size2_arg(value, op, "padding");
  }
  const std::string how = value.cast<std::string>();
  if (how == "valid") return {0, 0};
  if (how != "same") throw ValueError(str(op, ": invalid padding string '", how, "', should be one of {'valid', 'same'}"));
  if (stride[0] != 1 || stride[1] != 1) throw ValueError(str(op, ": padding='same' is not supported for strided convolutions"));
  Size2 out{0, 0};
  if (weight.dim() != dims + 2) return out;  // the convolution names the weight's wrong shape
  for (int d = 0; d < dims; ++d) {
    const int at = 2 - dims + d;  // the weight's spatial dims are its last `dims`
    const std::int64_t reach = weight.shape()[static_cast<std::size_t>(2 + d)] - 1;
    std::int64_t total = 0;
    if (__builtin_mul_overflow(dilation[static_cast<std::size_t>(at)], reach, &total))
      throw ValueError(str(op, ": dilation ", dilation[static_cast<std::size_t>(at)], " is too large"));
    if (total % 2 != 0)
      throw ValueError(str(op, ": padding='same' needs an even dilation * (kernel_size - 1), got ", total,
                           " (torch pads one side more; pad the input explicitly)"));
    out[static_cast<std::size_t>(at)] = total / 2;
  }
  return out;
}

// Stride for pooling: None (or an empty tuple) means the kernel size (0 here).
Size2 pool_stride_arg(const py::handle& value, int dims, const char* op) {
  if (value.is_none() || (py::isinstance<py::sequence>(value) && !py::isinstance<py::str>(value) && py::len(value) == 0))
    return {0, 0};
  if (dims == 1) return {1, size1_arg(value, op, "stride")};
  return size2_arg(value, op, "stride");
}

// adaptive output size: an int, or a pair whose None entries keep the input's size.
Size2 adaptive_size_arg(const py::handle& value, const Tensor& input) {
  const char* op = "adaptive_avg_pool2d";
  if (input.dim() < 2) throw ValueError(str(op, ": expected a 3-D or 4-D input, got ", shape_to_string(input.shape())));
  if (!py::isinstance<py::sequence>(value)) {
    const std::int64_t n = int64_arg(value, str(op, ": output_size"));
    return {n, n};
  }
  const auto seq = py::reinterpret_borrow<py::sequence>(value);
  if (seq.size() != 2) throw ValueError(str(op, ": output_size must have 2 values, got ", seq.size()));
  Size2 out{};
  for (std::size_t d = 0; d < 2; ++d) {
    const py::handle item = seq[d];
    out[d] = item.is_none() ? input.shape()[input.shape().size() - 2 + d] : int64_arg(item, str(op, ": output_size"));
  }
  return out;
}

}  // namespace

void init_conv(py::module_& m) {
  m.def(
      "conv2d",
      [](const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias, const py::object& stride,
         const py::object& padding, const py::object& dilation, std::int64_t groups) {
        const Size2 s = size2_arg(stride, "conv2d", "stride"), d = size2_arg(dilation, "conv2d", "dilation");
        const Size2 p = padding_arg(padding, weight, s, d, 2, "conv2d");
        py::gil_scoped_release release;
        return conv2d(input, weight, tensor_or_undefined(bias), s, p, d, groups);
      },
      "input"_a, "weight"_a, "bias"_a = py::none(), "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1, "groups"_a = 1,
      "torch.nn.functional.conv2d: input (N, C, H, W) or (C, H, W), weight (O, C / groups, kH, kW).");
  m.def(
      "conv1d",
      [](const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias, const py::object& stride,
         const py::object& padding, const py::object& dilation, std::int64_t groups) {
        const std::int64_t s = size1_arg(stride, "conv1d", "stride"), d = size1_arg(dilation, "conv1d", "dilation");
        const Size2 p = padding_arg(padding, weight, {1, s}, {1, d}, 1, "conv1d");
        py::gil_scoped_release release;
        return conv1d(input, weight, tensor_or_undefined(bias), s, p[1], d, groups);
      },
      "input"_a, "weight"_a, "bias"_a = py::none(), "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1, "groups"_a = 1,
      "torch.nn.functional.conv1d: input (N, C, L) or (C, L), weight (O, C / groups, k).");
  m.def(
      "max_pool2d",
      [](const Tensor& input, const py::object& kernel_size, const py::object& stride, const py::object& padding,
         const py::object& dilation, bool ceil_mode, bool return_indices) -> py::object {
        const char* op = "max_pool2d";
        auto [out, indices] = max_pool2d_with_indices(input, size2_arg(kernel_size, op, "kernel_size"),
                                                      pool_stride_arg(stride, 2, op), size2_arg(padding, op, "padding"),
                                                      size2_arg(dilation, op, "dilation"), ceil_mode);
        if (return_indices) return py::make_tuple(out, indices);
        return py::cast(out);
      },
      "input"_a, "kernel_size"_a, "stride"_a = py::none(), "padding"_a = 0, "dilation"_a = 1, "ceil_mode"_a = false,
      "return_indices"_a = false, "torch.nn.functional.max_pool2d (indices: flat positions in each H * W plane).");
  m.def(
      "max_pool1d",
      [](const Tensor& input, const py::object& kernel_size, const py::object& stride, const py::object& padding,
         const py::object& dilation, bool ceil_mode, bool return_indices) -> py::object {
        const char* op = "max_pool1d";
        if (input.dim() != 2 && input.dim() != 3)
          throw ValueError(str(op, ": expected a 2-D or 3-D input, got ", shape_to_string(input.shape())));
        const int at = input.dim() - 1;
        auto [out, indices] = max_pool2d_with_indices(
            input.unsqueeze(at), {1, size1_arg(kernel_size, op, "kernel_size")}, pool_stride_arg(stride, 1, op),
            {0, size1_arg(padding, op, "padding")}, {1, size1_arg(dilation, op, "dilation")}, ceil_mode);
        if (return_indices) return py::make_tuple(out.squeeze(at), indices.squeeze(at));
        return py::cast(out.squeeze(at));
      },
      "input"_a, "kernel_size"_a, "stride"_a = py::none(), "padding"_a = 0, "dilation"_a = 1, "ceil_mode"_a = false,
      "return_indices"_a = false, "torch.nn.functional.max_pool1d: input (N, C, L) or (C, L).");
  m.def(
      "avg_pool2d",
      [](const Tensor& input, const py::object& kernel_size, const py::object& stride, const py::object& padding,
         bool ceil_mode, bool count_include_pad, const std::optional<std::int64_t>& divisor_override) {
        const char* op = "avg_pool2d";
        if (divisor_override && *divisor_override <= 0) throw ValueError("avg_pool2d: divisor must be not zero");
        return avg_pool2d(input, size2_arg(kernel_size, op, "kernel_size"), pool_stride_arg(stride, 2, op),
                          size2_arg(padding, op, "padding"), ceil_mode, count_include_pad, divisor_override.value_or(0));
      },
      "input"_a, "kernel_size"_a, "stride"_a = py::none(), "padding"_a = 0, "ceil_mode"_a = false,
      "count_include_pad"_a = true, "divisor_override"_a = py::none(), "torch.nn.functional.avg_pool2d.");
  m.def(
      "adaptive_avg_pool2d",
      [](const Tensor& input, const py::object& output_size) {
        return adaptive_avg_pool2d(input, adaptive_size_arg(output_size, input));
      },
      "input"_a, "output_size"_a, "torch.nn.functional.adaptive_avg_pool2d (None in output_size keeps that dim).");
  m.def(
      "dropout2d",
      [](const Tensor& input, double p, bool training, bool inplace) {
        if (inplace) throw ValueError("dropout2d: inplace=True is not supported (the result is a new tensor)");
        return feature_dropout(input, p, training, 4);
      },
      "input"_a, "p"_a = 0.5, "training"_a = true, "inplace"_a = false,
      "torch.nn.functional.dropout2d: whole channels of (N, C, H, W) or (C, H, W) zeroed with probability p.");
  m.def(
      "dropout1d",
      [](const Tensor& input, double p, bool training, bool inplace) {
        if (inplace) throw ValueError("dropout1d: inplace=True is not supported (the result is a new tensor)");
        return feature_dropout(input, p, training, 3);
      },
      "input"_a, "p"_a = 0.5, "training"_a = true, "inplace"_a = false,
      "torch.nn.functional.dropout1d: whole channels of (N, C, L) or (C, L) zeroed with probability p.");
  m.def(
      "batch_norm",
      [](const Tensor& input, const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
         const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, bool training, double momentum,
         double eps) {
        return batch_norm(input, tensor_or_undefined(running_mean), tensor_or_undefined(running_var), tensor_or_undefined(weight), tensor_or_undefined(bias),
                          training, momentum, eps);
      },
      "input"_a, "running_mean"_a, "running_var"_a, "weight"_a = py::none(), "bias"_a = py::none(),
      "training"_a = false, "momentum"_a = 0.1, "eps"_a = 1e-5,
      "torch.nn.functional.batch_norm: training updates running_mean / running_var in place.");
  m.def(
      "group_norm",
      [](const Tensor& input, std::int64_t num_groups, const std::optional<Tensor>& weight,
         const std::optional<Tensor>& bias, double eps) {
        return group_norm(input, num_groups, tensor_or_undefined(weight), tensor_or_undefined(bias), eps);
      },
      "input"_a, "num_groups"_a, "weight"_a = py::none(), "bias"_a = py::none(), "eps"_a = 1e-5,
      "torch.nn.functional.group_norm.");

  py::class_<nn::Conv2d, nn::Module, std::shared_ptr<nn::Conv2d>>(m, "_Conv2d")
      .def(py::init([](std::int64_t in, std::int64_t out, const py::object& kernel_size, std::int64_t groups, bool bias) {
             return std::make_shared<nn::Conv2d>(in, out, size2_arg(kernel_size, "Conv2d", "kernel_size"), Size2{1, 1},
                                                 Size2{0, 0}, Size2{1, 1}, groups, bias);
           }),
           "in_channels"_a, "out_channels"_a, "kernel_size"_a, "groups"_a = 1, "bias"_a = true)
      .def_property_readonly("weight", [](const nn::Conv2d& c) { return c.weight; })
      .def_property_readonly("bias", [](const nn::Conv2d& c) { return tensor_or_none(c.bias); });
  py::class_<nn::Conv1d, nn::Module, std::shared_ptr<nn::Conv1d>>(m, "_Conv1d")
      .def(py::init([](std::int64_t in, std::int64_t out, const py::object& kernel_size, std::int64_t groups, bool bias) {
             return std::make_shared<nn::Conv1d>(in, out, size1_arg(kernel_size, "Conv1d", "kernel_size"), 1, 0, 1,
                                                 groups, bias);
           }),
           "in_channels"_a, "out_channels"_a, "kernel_size"_a, "groups"_a = 1, "bias"_a = true)
      .def_property_readonly("weight", [](const nn::Conv1d& c) { return c.weight; })
      .def_property_readonly("bias", [](const nn::Conv1d& c) { return tensor_or_none(c.bias); });
}

}  // namespace kael::python
