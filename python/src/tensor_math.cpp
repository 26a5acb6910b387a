// kael.Tensor's math: operators, elementwise functions, comparisons, reductions and matmul, each
// both a method and a kael.* function (t.exp() and kael.exp(t)), with PyTorch's names.
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "convert.hpp"

namespace py = pybind11;

namespace kael::python {

namespace {

using TensorFn = Tensor (*)(const Tensor&);

// Registers `f` as the method t.name(...) and the function kael.name(input, ...).
template <class F, class... Extra>
void method_and_function(py::class_<Tensor>& cls, py::module_& m, const char* name, F f, const Extra&... extra) {
  cls.def(name, f, extra...);
  m.def(name, f, py::arg("input"), extra...);
}

py::object not_implemented() { return py::reinterpret_borrow<py::object>(Py_NotImplemented); }

bool is_operand(const py::handle& object) { return py::isinstance<Tensor>(object) || scalar_arg(object).has_value(); }

Scalar scaled(Scalar value, Scalar alpha) {
  Scalar out = value;
  out.value = value.value * alpha.value;
  out.integral = value.integral && alpha.integral;
  return out;
}

Scalar alpha_arg(const py::handle& alpha) {
  auto scalar = scalar_arg(alpha);
  if (!scalar) throw TypeError("alpha must be a number");
  return *scalar;
}

Tensor add_any(const Tensor& a, const py::object& b, const py::object& alpha) {
  const Scalar k = alpha_arg(alpha);
  if (auto s = scalar_arg(b)) return add(a, scaled(*s, k));
  return add(a, tensor_arg(b, "add"), k);
}

Tensor sub_any(const Tensor& a, const py::object& b, const py::object& alpha) {
  const Scalar k = alpha_arg(alpha);
  if (auto s = scalar_arg(b)) return sub(a, scaled(*s, k));
  return sub(a, tensor_arg(b, "sub"), k);
}

Tensor mul_any(const Tensor& a, const py::object& b) {
  if (auto s = scalar_arg(b)) return mul(a, *s);
  return mul(a, tensor_arg(b, "mul"));
}

Tensor div_any(const Tensor& a, const py::object& b) {
  if (auto s = scalar_arg(b)) return div(a, *s);
  return div(a, tensor_arg(b, "div"));
}

Tensor pow_any(const Tensor& a, const py::object& exponent) {
  if (auto s = scalar_arg(exponent)) return pow(a, *s);
  return pow(a, tensor_arg(exponent, "pow"));
}

using Compare = Tensor (*)(const Tensor&, const Tensor&);
using CompareScalar = Tensor (*)(const Tensor&, Scalar);
template <Compare compare, CompareScalar compare_scalar>
Tensor compare_any(const Tensor& a, const py::object& b) {
  if (auto s = scalar_arg(b)) return compare_scalar(a, *s);
  return compare(a, tensor_arg(b, "comparison"));
}

// An operator: NotImplemented for operands kael does not take, so Python tries the other side.
template <class F>
auto operator_fn(F f) {
  return [f](const Tensor& a, const py::object& b) -> py::object {
    if (!is_operand(b)) return not_implemented();
    return py::cast(f(a, b));
  };
}

// In place: `self` returned, as Python's augmented assignment needs.
template <class F>
auto in_place(F f) {
  return [f](py::object self, const py::object& other) -> py::object {
    Tensor& t = self.cast<Tensor&>();
    f(t, other);
    return self;
  };
}

double number_arg(const py::handle& object, const char* op) {
  auto s = scalar_arg(object);
  if (!s) throw TypeError(str(op, ": expected a number or a kael.Tensor"));
  return s->value;
}

// t -= b, t *= b, t /= b for a tensor or a number: the operators and sub_/mul_/div_.
void sub_in_place(Tensor& t, const py::object& b) {
  if (py::isinstance<Tensor>(b)) t -= b.cast<Tensor>();
  else t -= number_arg(b, "sub_");
}

void mul_in_place(Tensor& t, const py::object& b) {
  if (py::isinstance<Tensor>(b)) t *= b.cast<Tensor>();
  else t *= number_arg(b, "mul_");
}

void div_in_place(Tensor& t, const py::object& b) {
  if (py::isinstance<Tensor>(b)) t /= b.cast<Tensor>();
  else t /= number_arg(b, "div_");
}

void add_in_place(Tensor& t, const py::object& other, const py::object& alpha) {
  const double k = number_arg(alpha, "add_");
  if (py::isinstance<Tensor>(other)) t.add_(other.cast<Tensor>(), k);
  else t += number_arg(other, "add_") * k;
}

py::object values_indices(const py::object& type, std::pair<Tensor, Tensor> result) {
  return type(result.first, result.second);
}

std::optional<int> optional_dim(const py::object& dim) {
  if (dim.is_none()) return std::nullopt;
  return int_arg(dim, "dim");
}

int correction_arg(const py::object& correction, const py::object& unbiased) {
  if (!correction.is_none()) return int_arg(correction, "correction");
  if (!unbiased.is_none()) return unbiased.cast<bool>() ? 1 : 0;
  return 1;
}

}  // namespace

void init_tensor_math(py::module_& m) {
  auto cls = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  const auto value_type = py::module_::import("collections").attr("namedtuple")("values_indices",
                                                                                   py::make_tuple("values", "indices"));
  m.attr("_values_indices") = value_type;

  // --- arithmetic: kael.add(a, b, alpha=1), a + b, b + a, a += b ---
  method_and_function(cls, m, "add", &add_any, py::arg("other"), py::kw_only(), py::arg("alpha") = 1);
  method_and_function(cls, m, "sub", &sub_any, py::arg("other"), py::kw_only(), py::arg("alpha") = 1);
  method_and_function(cls, m, "mul", &mul_any, py::arg("other"));
  method_and_function(cls, m, "div", &div_any, py::arg("other"));
  method_and_function(cls, m, "pow", &pow_any, py::arg("exponent"));
  const py::int_ one(1);
  cls.def("__add__", operator_fn([one](const Tensor& a, const py::object& b) { return add_any(a, b, one); }))
      .def("__radd__", operator_fn([one](const Tensor& a, const py::object& b) { return add_any(a, b, one); }))
      .def("__sub__", operator_fn([one](const Tensor& a, const py::object& b) { return sub_any(a, b, one); }))
      .def("__rsub__", operator_fn([](const Tensor& a, const py::object& b) {
             if (auto s = scalar_arg(b)) return *s - a;
             return sub(tensor_arg(b, "sub"), a);
           }))
      .def("__mul__", operator_fn(&mul_any))
      .def("__rmul__", operator_fn(&mul_any))
      .def("__truediv__", operator_fn(&div_any))
      .def("__rtruediv__", operator_fn([](const Tensor& a, const py::object& b) {
             if (auto s = scalar_arg(b)) return *s / a;
             return div(tensor_arg(b, "div"), a);
           }))
      .def("__pow__", operator_fn(&pow_any))
      .def("__rpow__", operator_fn([](const Tensor& a, const py::object& b) { return pow(operand_like(b, a, "pow"), a); }))
      .def("__matmul__", [](const Tensor& a, const py::object& b) -> py::object {
        if (!py::isinstance<Tensor>(b)) return not_implemented();
        return py::cast(matmul(a, b.cast<Tensor>()));
      })
      .def("__neg__", [](const Tensor& a) { return neg(a); })
      .def("__pos__", [](const Tensor& a) { return a; })
      .def("__abs__", [](const Tensor& a) { return abs(a); })
      .def("__eq__", operator_fn(&compare_any<eq, eq>))
      .def("__ne__", operator_fn(&compare_any<ne, ne>))
      .def("__lt__", operator_fn(&compare_any<lt, lt>))
      .def("__le__", operator_fn(&compare_any<le, le>))
      .def("__gt__", operator_fn(&compare_any<gt, gt>))
      .def("__ge__", operator_fn(&compare_any<ge, ge>))
      .def("__iadd__", in_place([one](Tensor& t, const py::object& b) { add_in_place(t, b, one); }))
      .def("__isub__", in_place(&sub_in_place))
      .def("__imul__", in_place(&mul_in_place))
      .def("__itruediv__", in_place(&div_in_place))
      .def("add_",
           [](py::object self, const py::object& other, const py::object& alpha) {
             add_in_place(self.cast<Tensor&>(), other, alpha);
             return self;
           },
           "other"_a, py::kw_only(), "alpha"_a = 1)
      .def("sub_", in_place(&sub_in_place), "other"_a)
      .def("mul_", in_place(&mul_in_place), "other"_a)
      .def("div_", in_place(&div_in_place), "other"_a)
      .def("fill_", in_place([](Tensor& t, const py::object& v) { t.fill_(number_arg(v, "fill_")); }), "value"_a)
      .def("zero_", [](py::object self) {
        self.cast<Tensor&>().zero_();
        return self;
      })
      .def("copy_", in_place([](Tensor& t, const py::object& src) { t.copy_(tensor_arg(src, "copy_")); }), "src"_a);

  // --- elementwise functions ---
  const std::pair<const char*, TensorFn> unary[] = {
      {"neg", &kael::neg},     {"abs", &kael::abs},   {"exp", &kael::exp},
      {"log", &kael::log},     {"sqrt", &kael::sqrt}, {"rsqrt", &kael::rsqrt},
      {"tanh", &kael::tanh},   {"sigmoid", &kael::sigmoid}, {"relu", &kael::relu}};
  for (const auto& [name, fn] : unary) method_and_function(cls, m, name, fn);
  method_and_function(
      cls, m, "gelu", [](const Tensor& a, const std::string& approximate) { return gelu(a, approximate.c_str()); },
      py::kw_only(), py::arg("approximate") = "none");
  method_and_function(cls, m, "maximum", &maximum, py::arg("other"));
  method_and_function(cls, m, "minimum", &minimum, py::arg("other"));
  method_and_function(cls, m, "eq", &compare_any<eq, eq>, py::arg("other"));
  method_and_function(cls, m, "ne", &compare_any<ne, ne>, py::arg("other"));
  method_and_function(cls, m, "lt", &compare_any<lt, lt>, py::arg("other"));
  method_and_function(cls, m, "le", &compare_any<le, le>, py::arg("other"));
  method_and_function(cls, m, "gt", &compare_any<gt, gt>, py::arg("other"));
  method_and_function(cls, m, "ge", &compare_any<ge, ge>, py::arg("other"));
  method_and_function(
      cls, m, "masked_fill",
      [](const Tensor& a, const Tensor& mask, const py::object& value) {
        if (py::isinstance<Tensor>(value)) {
          const Tensor v = value.cast<Tensor>();
          if (v.dim() != 0) throw ValueError(str("masked_fill: the value must be a number or a 0-d tensor, not shape ",
                                                 shape_to_string(v.shape())));
          return where(mask, v.to(a.dtype()), a);
        }
        return masked_fill(a, mask, *scalar_arg(value));
      },
      py::arg("mask"), py::arg("value"));
  m.def(
      "where",
      [](const Tensor& condition, const py::object& input, const py::object& other) {
        const Tensor x = py::isinstance<Tensor>(input) ? input.cast<Tensor>() : Tensor();
        const Tensor y = py::isinstance<Tensor>(other) ? other.cast<Tensor>() : Tensor();
        if (!x.defined() && !y.defined()) {
          const Tensor like = operand_like(input, full({}, 0, DType::BOOL), "where");
          return where(condition, like, operand_like(other, like, "where"));
        }
        const Tensor& like = x.defined() ? x : y;
        return where(condition, operand_like(input, like, "where"), operand_like(other, like, "where"));
      },
      "condition"_a, "input"_a, "other"_a);
  cls.def("where", [](const Tensor& self, const Tensor& condition, const py::object& other) {
    return where(condition, self, operand_like(other, self, "where"));
  }, "condition"_a, "other"_a);

  // --- reductions ---
  method_and_function(
      cls, m, "sum", [](const Tensor& a, const py::object& dim, bool keepdim) { return sum(a, dims_arg(dim), keepdim); },
      py::arg("dim") = py::none(), py::arg("keepdim") = false);
  method_and_function(
      cls, m, "mean", [](const Tensor& a, const py::object& dim, bool keepdim) { return mean(a, dims_arg(dim), keepdim); },
      py::arg("dim") = py::none(), py::arg("keepdim") = false);
  method_and_function(
      cls, m, "all", [](const Tensor& a, const py::object& dim, bool keepdim) { return all(a, dims_arg(dim), keepdim); },
      py::arg("dim") = py::none(), py::arg("keepdim") = false);
  method_and_function(
      cls, m, "any", [](const Tensor& a, const py::object& dim, bool keepdim) { return any(a, dims_arg(dim), keepdim); },
      py::arg("dim") = py::none(), py::arg("keepdim") = false);
  method_and_function(
      cls, m, "var",
      [](const Tensor& a, const py::object& dim, const py::object& unbiased, bool keepdim, const py::object& correction) {
        return var(a, dims_arg(dim), keepdim, correction_arg(correction, unbiased));
      },
      py::arg("dim") = py::none(), py::arg("unbiased") = py::none(), py::arg("keepdim") = false, py::kw_only(),
      py::arg("correction") = py::none());
  for (const bool is_max : {true, false}) {
    method_and_function(
        cls, m, is_max ? "max" : "min",
        [is_max, value_type](const Tensor& a, const py::object& dim, bool keepdim) -> py::object {
          if (dim.is_none()) return py::cast(is_max ? max(a) : min(a));
          if (py::isinstance<Tensor>(dim)) return py::cast(is_max ? maximum(a, dim.cast<Tensor>()) : minimum(a, dim.cast<Tensor>()));
          const int d = int_arg(dim, is_max ? "max: dim" : "min: dim");
          return values_indices(value_type, is_max ? max(a, d, keepdim) : min(a, d, keepdim));
        },
        py::arg("dim") = py::none(), py::arg("keepdim") = false);
  }
  method_and_function(
      cls, m, "argmax",
      [](const Tensor& a, const py::object& dim, bool keepdim) {
        const auto d = optional_dim(dim);
        return d ? argmax(a, *d, keepdim) : argmax(a);
      },
      py::arg("dim") = py::none(), py::arg("keepdim") = false);
  method_and_function(
      cls, m, "argmin",
      [](const Tensor& a, const py::object& dim, bool keepdim) {
        const auto d = optional_dim(dim);
        return d ? argmin(a, *d, keepdim) : argmin(a.reshape({-1}), 0);
      },
      py::arg("dim") = py::none(), py::arg("keepdim") = false);

  // --- products and normalizations ---
  method_and_function(
      cls, m, "matmul",
      [](const Tensor& a, const Tensor& b) {
        py::gil_scoped_release release;
        return matmul(a, b);
      },
      py::arg("other"));
  method_and_function(cls, m, "softmax", &softmax, py::arg("dim"));
  method_and_function(cls, m, "log_softmax", &log_softmax, py::arg("dim"));
  method_and_function(
      cls, m, "allclose",
      [](const Tensor& a, const Tensor& b, double rtol, double atol) { return allclose(a, b, rtol, atol); },
      py::arg("other"), py::arg("rtol") = 1e-5, py::arg("atol") = 1e-8);
}

}  // namespace kael::python
