// kael.Tensor's further ops with torch's names: sin/cos/clamp, // and %, std, topk, gather,
// multinomial/randperm and the in-place random fills, split/chunk/unbind/repeat/roll, tril/triu,
// bmm/einsum, the new_* constructors, .data, type_as, mT, __format__, and the losses of
// kael.nn.functional (cross_entropy, nll_loss, mse_loss, one_hot, scaled_dot_product_attention).
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "convert.hpp"
#include "kael/tensor/autograd.hpp"

namespace py = pybind11;

namespace kael::python {

namespace {

py::object not_implemented() { return py::reinterpret_borrow<py::object>(Py_NotImplemented); }

template <class F, class... Extra>
void method_and_function(py::class_<Tensor>& cls, py::module_& m, const char* name, F f, const Extra&... extra) {
  cls.def(name, f, extra...);
  m.def(name, f, py::arg("input"), extra...);
}

std::optional<Scalar> optional_scalar(const py::object& value, const char* op) {
  if (value.is_none()) return std::nullopt;
  if (auto s = scalar_arg(value)) return s;
  if (py::isinstance<Tensor>(value)) {
    const Tensor t = value.cast<Tensor>();
    if (t.numel() == 1) return Scalar(t.to(DType::F64).item<double>());
  }
  throw TypeError(str(op, ": expected a number or None"));
}

// a // b and a % b with a tensor or a number on either side.
template <Tensor (*tensor_op)(const Tensor&, const Tensor&)>
py::object binary(const Tensor& a, const py::object& b, bool reflected, const char* op) {
  Tensor other;
  if (py::isinstance<Tensor>(b)) other = b.cast<Tensor>();
  else if (scalar_arg(b)) other = operand_like(b, a, op);
  else return not_implemented();
  return py::cast(reflected ? tensor_op(other, a) : tensor_op(a, other));
}

py::tuple as_tuple(const std::vector<Tensor>& pieces) { return py::tuple(py::cast(pieces)); }

std::vector<Tensor> split_any(const Tensor& t, const py::object& size_or_sections, int dim) {
  if (!py::isinstance<py::sequence>(size_or_sections))
    return split(t, int64_arg(size_or_sections, "split: split_size_or_sections"), dim);
  std::vector<std::int64_t> sizes;
  for (const py::handle size : size_or_sections) sizes.push_back(int64_arg(size, "split: split_size_or_sections"));
  return split(t, sizes, dim);
}

// An int or a sequence of them, each checked as int64_arg / int_arg check it.
std::vector<std::int64_t> int_list(const py::object& value, const std::string& what) {
  if (!py::isinstance<py::sequence>(value)) return {int64_arg(value, what)};
  std::vector<std::int64_t> out;
  for (const py::handle item : value) out.push_back(int64_arg(item, what));
  return out;
}

std::vector<int> dim_list(const py::object& value, const std::string& what) {
  if (value.is_none()) return {};
  if (!py::isinstance<py::sequence>(value)) return {int_arg(value, what)};
  std::vector<int> out;
  for (const py::handle item : value) out.push_back(int_arg(item, what));
  return out;
}

// The options of a new_* constructor: dtype, device (self's by default, as torch) and requires_grad.
Tensor new_like(const Tensor& self, Tensor made, const py::object& dtype, const py::object& device, bool requires_grad) {
  made = made.to(dtype_arg(dtype, self.dtype())).to(device.is_none() ? self.device() : device_arg(device));
  if (requires_grad) made.requires_grad_(true);
  return made;
}

std::string reduction_arg(const py::object& reduction, const py::object& size_average, const py::object& reduce,
                          const char* op) {
  if (!size_average.is_none() || !reduce.is_none())
    throw TypeError(str(op, ": size_average and reduce are deprecated in torch and not taken; use reduction"));
  return utf8_arg(reduction, str(op, ": reduction"));
}

void no_class_weights(const py::object& weight, const char* op) {
  if (!weight.is_none()) throw ValueError(str(op, ": class weights are not supported"));
}

}  // namespace

void init_tensor_ops(py::module_& m) {
  auto cls = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  const py::object values_indices = m.attr("_values_indices");

  method_and_function(cls, m, "sin", &kael::sin);
  method_and_function(cls, m, "cos", &kael::cos);
  for (const char* name : {"clamp", "clip"})
    method_and_function(
        cls, m, name,
        [](const Tensor& a, const py::object& min, const py::object& max) {
          return clamp(a, optional_scalar(min, "clamp"), optional_scalar(max, "clamp"));
        },
        py::arg("min") = py::none(), py::arg("max") = py::none());
  cls.def(
      "clamp_",
      [](py::object self, const py::object& min, const py::object& max) {
        Tensor& t = self.cast<Tensor&>();
        // clamp saves its input for the backward: a copy of t, which the write leaves as it was
        const Tensor input = t.requires_grad() && kael::autograd::grad_mode_enabled() ? t.clone() : t;
        t.copy_(clamp(input, optional_scalar(min, "clamp_"), optional_scalar(max, "clamp_")));
        return self;
      },
      py::arg("min") = py::none(), py::arg("max") = py::none());
  method_and_function(
      cls, m, "floor_divide", [](const Tensor& a, const py::object& b) { return binary<&floor_divide>(a, b, false, "floor_divide"); },
      py::arg("other"));
  method_and_function(
      cls, m, "remainder", [](const Tensor& a, const py::object& b) { return binary<&remainder>(a, b, false, "remainder"); },
      py::arg("other"));
  cls.def("__floordiv__", [](const Tensor& a, const py::object& b) { return binary<&floor_divide>(a, b, false, "floor_divide"); })
      .def("__rfloordiv__", [](const Tensor& a, const py::object& b) { return binary<&floor_divide>(a, b, true, "floor_divide"); })
      .def("__mod__", [](const Tensor& a, const py::object& b) { return binary<&remainder>(a, b, false, "remainder"); })
      .def("__rmod__", [](const Tensor& a, const py::object& b) { return binary<&remainder>(a, b, true, "remainder"); });

  method_and_function(
      cls, m, "std",
      [](const Tensor& a, const py::object& dim, const py::object& unbiased, bool keepdim, const py::object& correction) {
        int c = 1;
        if (!correction.is_none()) c = int_arg(correction, "std: correction");
        else if (!unbiased.is_none()) c = unbiased.cast<bool>() ? 1 : 0;
        return kael::std(a, dims_arg(dim), keepdim, c);
      },
      py::arg("dim") = py::none(), py::arg("unbiased") = py::none(), py::arg("keepdim") = false, py::kw_only(),
      py::arg("correction") = py::none());
  method_and_function(
      cls, m, "topk",
      [values_indices](const Tensor& a, const py::object& k, const py::object& dim, bool largest, bool sorted) {
        auto [values, indices] = topk(a, int64_arg(k, "topk: k"), int_arg(dim, "topk: dim"), largest, sorted);
        return values_indices(values, indices);
      },
      py::arg("k"), py::arg("dim") = -1, py::arg("largest") = true, py::arg("sorted") = true);
  method_and_function(cls, m, "gather", [](const Tensor& a, const py::object& dim, const Tensor& index) { return gather(a, int_arg(dim, "gather: dim"), index); },
                      py::arg("dim"), py::arg("index"));
  method_and_function(
      cls, m, "multinomial",
      [](const Tensor& probs, const py::object& num_samples, bool replacement, const py::object& generator) {
        check_no_generator(generator, "multinomial");
        return multinomial(probs, int64_arg(num_samples, "multinomial: num_samples"), replacement);
      },
      py::arg("num_samples"), py::arg("replacement") = false, py::kw_only(), py::arg("generator") = py::none());
  m.def(
      "randperm",
      [](const py::object& n, const py::object& dtype, const py::object& device, bool requires_grad) {
        Tensor t = randperm(int64_arg(n, "randperm: n"), dtype_arg(dtype, DType::I64));
        if (!device.is_none()) t = t.to(device_arg(device));
        if (requires_grad) t.requires_grad_(true);
        return t;
      },
      "n"_a, py::kw_only(), "dtype"_a = py::none(), "device"_a = py::none(), "requires_grad"_a = false,
      "A random permutation of 0 .. n-1 from the generator kael.manual_seed seeds.");
  cls.def(
         "normal_",
         [](py::object self, double mean, double std, const py::object& generator) {
           check_no_generator(generator, "normal_");
           normal_(self.cast<Tensor&>(), mean, std);
           return self;
         },
         "mean"_a = 0.0, "std"_a = 1.0, py::kw_only(), "generator"_a = py::none())
      .def(
          "uniform_",
          [](py::object self, double from, double to, const py::object& generator) {
            check_no_generator(generator, "uniform_");
            uniform_(self.cast<Tensor&>(), from, to);
            return self;
          },
          "from_"_a = 0.0, "to"_a = 1.0, py::kw_only(), "generator"_a = py::none())
      .def(
          "masked_fill_",
          [](py::object self, const Tensor& mask, const py::object& value) {
            Tensor& t = self.cast<Tensor&>();
            if (auto s = scalar_arg(value)) masked_fill_(t, mask, *s);
            else t.copy_(where(mask, tensor_arg(value, "masked_fill_").to(t.dtype()), t));
            return self;
          },
          "mask"_a, "value"_a);

  // --- cutting, tiling, shifting, masking ---
  method_and_function(
      cls, m, "split", [](const Tensor& t, const py::object& size, const py::object& dim) {
        return as_tuple(split_any(t, size, int_arg(dim, "split: dim")));
      },
      py::arg("split_size_or_sections"), py::arg("dim") = 0);
  method_and_function(
      cls, m, "chunk", [](const Tensor& t, const py::object& chunks, const py::object& dim) {
        return as_tuple(chunk(t, int64_arg(chunks, "chunk: chunks"), int_arg(dim, "chunk: dim")));
      },
      py::arg("chunks"), py::arg("dim") = 0);
  method_and_function(cls, m, "unbind", [](const Tensor& t, const py::object& dim) { return as_tuple(unbind(t, int_arg(dim, "unbind: dim"))); }, py::arg("dim") = 0);
  cls.def("repeat", [](const Tensor& t, const py::args& sizes) { return repeat(t, shape_from_args(sizes, "repeat")); },
          "Tiles the tensor: t.repeat(2, 1) stacks two copies along dim 0.");
  method_and_function(
      cls, m, "roll",
      [](const Tensor& t, const py::object& shifts, const py::object& dims) { return roll(t, int_list(shifts, "roll: shifts"), dim_list(dims, "roll: dims")); },
      py::arg("shifts"), py::arg("dims") = py::none());
  method_and_function(
      cls, m, "tril", [](const Tensor& t, const py::object& diagonal) { return tril(t, int64_arg(diagonal, "tril: diagonal")); },
      py::arg("diagonal") = 0);
  method_and_function(
      cls, m, "triu", [](const Tensor& t, const py::object& diagonal) { return triu(t, int64_arg(diagonal, "triu: diagonal")); },
      py::arg("diagonal") = 0);
  for (const bool lower : {true, false})
    cls.def(lower ? "tril_" : "triu_", [lower](py::object self, const py::object& diagonal_object) {
      Tensor& t = self.cast<Tensor&>();
      const std::int64_t diagonal = int64_arg(diagonal_object, lower ? "tril_: diagonal" : "triu_: diagonal");
      t.copy_(lower ? tril(t, diagonal) : triu(t, diagonal));
      return self;
    }, py::arg("diagonal") = 0);
  method_and_function(
      cls, m, "bmm",
      [](const Tensor& a, const Tensor& b) {
        py::gil_scoped_release release;
        return bmm(a, b);
      },
      py::arg("mat2"));
  m.def(
      "einsum",
      [](const py::object& equation_object, const py::args& operands) {
        const std::string equation = utf8_arg(equation_object, "einsum: equation");
        std::vector<Tensor> tensors;
        // torch takes einsum(eq, a, b) and einsum(eq, [a, b])
        if (operands.size() == 1 && !py::isinstance<Tensor>(operands[0]))
          for (const py::handle item : operands[0]) tensors.push_back(tensor_arg(item, "einsum"));
        else
          for (const py::handle item : operands) tensors.push_back(tensor_arg(item, "einsum"));
        py::gil_scoped_release release;
        return einsum(equation, tensors);
      },
      "equation"_a, "Einstein summation over the operands: kael.einsum('bij,bjk->bik', a, b).");
  m.def("as_strided_scatter", [](const Tensor& input, const Tensor& src, const py::object& size, const py::object& stride,
                                 const py::object& offset) {
    return as_strided_scatter(input, src, shape_arg(size, "as_strided_scatter"), shape_arg(stride, "as_strided_scatter"),
                              int64_arg(offset, "as_strided_scatter: storage_offset"));
  }, "input"_a, "src"_a, "size"_a, "stride"_a, "storage_offset"_a = 0);

  // --- constructors and conversions that follow another tensor ---
  cls.def("new_zeros", [](const Tensor& t, const py::args& size, const py::object& dtype, const py::object& device,
                          bool requires_grad) {
    return new_like(t, zeros(shape_from_args(size, "new_zeros"), t.dtype()), dtype, device, requires_grad);
  }, py::kw_only(), "dtype"_a = py::none(), "device"_a = py::none(), "requires_grad"_a = false)
      .def("new_ones", [](const Tensor& t, const py::args& size, const py::object& dtype, const py::object& device,
                          bool requires_grad) {
        return new_like(t, ones(shape_from_args(size, "new_ones"), t.dtype()), dtype, device, requires_grad);
      }, py::kw_only(), "dtype"_a = py::none(), "device"_a = py::none(), "requires_grad"_a = false)
      .def("new_empty", [](const Tensor& t, const py::args& size, const py::object& dtype, const py::object& device,
                           bool requires_grad) {
        return new_like(t, empty(shape_from_args(size, "new_empty"), t.dtype()), dtype, device, requires_grad);
      }, py::kw_only(), "dtype"_a = py::none(), "device"_a = py::none(), "requires_grad"_a = false)
      .def("new_full", [](const Tensor& t, const py::object& size, const py::object& fill_value, const py::object& dtype,
                          const py::object& device, bool requires_grad) {
        const auto value = scalar_arg(fill_value);
        if (!value) throw TypeError("new_full: fill_value must be a number");
        return new_like(t, full(shape_arg(size, "new_full"), *value, t.dtype()), dtype, device, requires_grad);
      }, "size"_a, "fill_value"_a, py::kw_only(), "dtype"_a = py::none(), "device"_a = py::none(), "requires_grad"_a = false)
      .def("new_tensor", [](const Tensor& t, const py::object& data, const py::object& dtype, const py::object& device,
                            bool requires_grad) {
        const Tensor made = py::module_::import("kael").attr("tensor")(data).cast<Tensor>();
        return new_like(t, made, dtype.is_none() ? dtype_object(t.dtype()) : dtype, device, requires_grad);
      }, "data"_a, py::kw_only(), "dtype"_a = py::none(), "device"_a = py::none(), "requires_grad"_a = false)
      .def("type_as", [](const Tensor& t, const Tensor& other) { return t.to(other.dtype()); }, "other"_a)
      .def_property_readonly("mT", [](const Tensor& t) {
        if (t.dim() < 2) throw ValueError(str("mT: needs a tensor of at least 2 dims, got shape ", shape_to_string(t.shape())));
        return t.transpose(-2, -1);
      }, "The last two dims swapped (a view).")
      .def_property(
          "data", [](const Tensor& t) { return t.detach(); },
          [](Tensor& t, const Tensor& value) {
            // torch's t.data = v: t now holds v's values (and shape, dtype), with its own autograd state.
            Tensor replaced = value.detach();
            replaced.set_autograd_meta(t.autograd_meta());
            t = replaced;
          },
          "The values without history (shares memory); assigning replaces them, keeping requires_grad.")
      .def("__format__", [](const py::object& self, const std::string& spec) -> py::object {
        const Tensor& t = self.cast<const Tensor&>();
        if (t.dim() == 0) return py::module_::import("builtins").attr("format")(self.attr("item")(), spec);
        return py::str(self);
      });

  // --- kael.nn.functional's losses and attention ---
  m.def(
      "cross_entropy",
      [](const Tensor& input, const Tensor& target, const py::object& weight, const py::object& size_average,
         const py::object& ignore_index, const py::object& reduce, const py::object& reduction, double label_smoothing) {
        no_class_weights(weight, "cross_entropy");
        const std::string r = reduction_arg(reduction, size_average, reduce, "cross_entropy");
        const std::int64_t ignored = int64_arg(ignore_index, "cross_entropy: ignore_index");
        py::gil_scoped_release release;
        return cross_entropy(input, target, ignored, r, label_smoothing);
      },
      "input"_a, "target"_a, "weight"_a = py::none(), "size_average"_a = py::none(), "ignore_index"_a = -100,
      "reduce"_a = py::none(), "reduction"_a = "mean", "label_smoothing"_a = 0.0,
      "torch.nn.functional.cross_entropy with class-id targets: input (N, C), (C) or (N, C, d...).");
  m.def(
      "nll_loss",
      [](const Tensor& input, const Tensor& target, const py::object& weight, const py::object& size_average,
         const py::object& ignore_index, const py::object& reduce, const py::object& reduction) {
        no_class_weights(weight, "nll_loss");
        return nll_loss(input, target, int64_arg(ignore_index, "nll_loss: ignore_index"),
                        reduction_arg(reduction, size_average, reduce, "nll_loss"));
      },
      "input"_a, "target"_a, "weight"_a = py::none(), "size_average"_a = py::none(), "ignore_index"_a = -100,
      "reduce"_a = py::none(), "reduction"_a = "mean");
  m.def(
      "mse_loss",
      [](const Tensor& input, const Tensor& target, const py::object& size_average, const py::object& reduce,
         const py::object& reduction) {
        return mse_loss(input, target, reduction_arg(reduction, size_average, reduce, "mse_loss"));
      },
      "input"_a, "target"_a, "size_average"_a = py::none(), "reduce"_a = py::none(), "reduction"_a = "mean");
  m.def("one_hot", [](const Tensor& ids, const py::object& num_classes) {
          return one_hot(ids, int64_arg(num_classes, "one_hot: num_classes"));
        }, "tensor"_a,
        "num_classes"_a = -1);
  m.def(
      "scaled_dot_product_attention",
      [](const Tensor& query, const Tensor& key, const Tensor& value, const std::optional<Tensor>& attn_mask,
         double dropout_p, bool is_causal, std::optional<double> scale) {
        py::gil_scoped_release release;
        return scaled_dot_product_attention(query, key, value, is_causal, attn_mask.value_or(Tensor()), scale, dropout_p);
      },
      "query"_a, "key"_a, "value"_a, "attn_mask"_a = py::none(), "dropout_p"_a = 0.0, "is_causal"_a = false,
      "scale"_a = py::none(),
      "softmax(scale q k^T + mask) v for q (..., L, E), k (..., S, E), v (..., S, Ev); is_causal keeps s <= t; "
      "dropout_p drops probabilities.");
}

}  // namespace kael::python
