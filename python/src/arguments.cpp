// Python arguments as kael values: numbers as Scalars, dims, shapes given as PyTorch allows.
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "convert.hpp"

namespace py = pybind11;

namespace kael::python {

namespace {
std::string type_name(const py::handle& object) { return py::str(py::type::of(object).attr("__name__")); }
}  // namespace

std::optional<Scalar> scalar_arg(const py::handle& object) {
  if (PyBool_Check(object.ptr())) return Scalar(object.cast<bool>());
  if (PyLong_Check(object.ptr())) return Scalar(object.cast<std::int64_t>());
  if (PyFloat_Check(object.ptr())) return Scalar(object.cast<double>());
  // numpy scalars: np.bool_, np.integer, np.floating
  if (py::hasattr(object, "dtype") && py::hasattr(object, "item") && !py::isinstance<py::array>(object) &&
      !py::isinstance<Tensor>(object)) {
    py::object value = object.attr("item")();
    if (PyBool_Check(value.ptr()) || PyLong_Check(value.ptr()) || PyFloat_Check(value.ptr())) return scalar_arg(value);
  }
  return std::nullopt;
}

Tensor tensor_arg(const py::handle& object, const char* op) {
  if (py::isinstance<Tensor>(object)) return object.cast<Tensor>();
  throw TypeError(str(op, ": expected a kael.Tensor, got ", type_name(object)));
}

Tensor operand_like(const py::handle& object, const Tensor& like, const char* op) {
  if (py::isinstance<Tensor>(object)) return object.cast<Tensor>();
  const auto scalar = scalar_arg(object);
  if (!scalar) throw TypeError(str(op, ": expected a kael.Tensor or a number, got ", type_name(object)));
  DType dtype = like.dtype();
  if (!scalar->integral && !is_floating(dtype)) dtype = DType::F32;
  if (scalar->integral && dtype == DType::BOOL && PyBool_Check(object.ptr()) == 0) dtype = DType::I64;
  return full({}, *scalar, dtype);
}

std::vector<int> dims_arg(const py::handle& object) {
  if (object.is_none()) return {};
  if (PyLong_Check(object.ptr())) return {object.cast<int>()};
  if (py::isinstance<py::sequence>(object) && !py::isinstance<py::str>(object)) return object.cast<std::vector<int>>();
  throw TypeError(str("dim must be an int, a sequence of ints or None, not ", type_name(object)));
}

Shape shape_arg(const py::handle& object, const char* op) {
  if (PyLong_Check(object.ptr())) return {object.cast<std::int64_t>()};
  if (py::isinstance<py::sequence>(object) && !py::isinstance<py::str>(object)) {
    Shape shape;
    for (const py::handle item : object) {
      if (!PyLong_Check(item.ptr()) && !py::hasattr(item, "__index__"))
        throw TypeError(str(op, ": a size must be an int, not ", type_name(item)));
      shape.push_back(item.cast<std::int64_t>());
    }
    return shape;
  }
  throw TypeError(str(op, ": a shape must be ints or a sequence of ints, not ", type_name(object)));
}

Shape shape_from_args(const py::args& args, const char* op) {
  if (args.size() == 1 && !PyLong_Check(args[0].ptr())) return shape_arg(args[0], op);
  return shape_arg(static_cast<const py::handle&>(args), op);
}

}  // namespace kael::python
