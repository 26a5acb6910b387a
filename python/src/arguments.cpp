// Python arguments as kael values: integers and text checked with errors that name the argument,
// numbers as Scalars, dims, shapes given as PyTorch allows.
#include <pybind11/stl.h>

#include <climits>
#include <optional>

#include "bindings.hpp"
#include "convert.hpp"

namespace py = pybind11;

namespace kael::python {

namespace {
std::string type_name(const py::handle& object) { return py::str(py::type::of(object).attr("__name__")); }

// `object` as a Python int (it or its __index__), or TypeError naming `what`.
py::int_ python_int(const py::handle& object, const std::string& what) {
  PyObject* index = PyNumber_Index(object.ptr());
  if (index == nullptr) {
    PyErr_Clear();
    throw TypeError(str(what, " must be an int, not ", type_name(object)));
  }
  return py::reinterpret_steal<py::int_>(index);
}

[[noreturn]] void out_of_range(const py::int_& value, const std::string& what, const char* range) {
  throw ValueError(str(what, " ", std::string(py::repr(value)), " is out of range: it must be in ", range));
}

// The value if it fits in a long long.
std::optional<long long> as_long_long(const py::int_& value) {
  int overflow = 0;
  const long long result = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (overflow != 0) return std::nullopt;
  return result;
}
}  // namespace

std::int64_t int64_arg(const py::handle& object, const std::string& what) {
  const py::int_ value = python_int(object, what);
  const auto result = as_long_long(value);
  if (!result) out_of_range(value, what, "int64's range [-2**63, 2**63 - 1]");
  return *result;
}

int int_arg(const py::handle& object, const std::string& what) {
  const py::int_ value = python_int(object, what);
  const auto result = as_long_long(value);
  if (!result || *result < INT_MIN || *result > INT_MAX) out_of_range(value, what, "int32's range [-2**31, 2**31 - 1]");
  return static_cast<int>(*result);
}

void check_no_generator(const py::handle& generator, const char* op) {
  if (!generator.is_none()) throw ValueError(str(op, ": generator objects are not supported (use kael.manual_seed)"));
}

std::uint64_t seed_arg(const py::handle& object, const std::string& what) {
  const py::int_ value = python_int(object, what);
  if (const auto result = as_long_long(value)) return static_cast<std::uint64_t>(*result);  // negatives modulo 2**64
  const unsigned long long unsigned_value = PyLong_AsUnsignedLongLong(value.ptr());
  if (!PyErr_Occurred()) return unsigned_value;
  PyErr_Clear();
  out_of_range(value, what, "[-2**63, 2**64 - 1]");
}

std::string utf8_arg(const py::handle& object, const std::string& what) {
  if (!py::isinstance<py::str>(object)) throw TypeError(str(what, " must be a str, not ", type_name(object)));
  Py_ssize_t size = 0;
  const char* bytes = PyUnicode_AsUTF8AndSize(object.ptr(), &size);
  if (bytes != nullptr) return {bytes, static_cast<std::size_t>(size)};
  PyErr_Clear();
  // Only a lone surrogate (U+D800..U+DFFF, as '\ud800' or from surrogateescape) has no UTF-8.
  throw ValueError(str(what, " holds a lone surrogate, which has no UTF-8 encoding; a str must hold only "
                       "code points outside U+D800..U+DFFF (bytes are passed as they are)"));
}

std::optional<Scalar> scalar_arg(const py::handle& object, const std::string& what) {
  if (PyBool_Check(object.ptr())) return Scalar(object.cast<bool>());
  if (PyLong_Check(object.ptr())) return Scalar(int64_arg(object, what));
  if (PyFloat_Check(object.ptr())) return Scalar(object.cast<double>());
  // numpy scalars: np.bool_, np.integer, np.floating. A Tensor is refused first: it has dtype and
  // item too, and reading its dtype builds an object, on every tensor operand of every operator.
  if (py::isinstance<Tensor>(object)) return std::nullopt;
  if (py::hasattr(object, "dtype") && py::hasattr(object, "item") && !py::isinstance<py::array>(object)) {
    py::object value = object.attr("item")();
    if (PyBool_Check(value.ptr()) || PyLong_Check(value.ptr()) || PyFloat_Check(value.ptr())) return scalar_arg(value, what);
  }
  return std::nullopt;
}

Tensor tensor_arg(const py::handle& object, const char* op) {
  if (py::isinstance<Tensor>(object)) return object.cast<Tensor>();
  throw TypeError(str(op, ": expected a kael.Tensor, got ", type_name(object)));
}

Tensor operand_like(const py::handle& object, const Tensor& like, const char* op) {
  if (py::isinstance<Tensor>(object)) return object.cast<Tensor>();
  const auto scalar = scalar_arg(object, str(op, ": the number"));
  if (!scalar) throw TypeError(str(op, ": expected a kael.Tensor or a number, got ", type_name(object)));
  DType dtype = like.dtype();
  if (!scalar->integral && !is_floating(dtype)) dtype = DType::F32;
  if (scalar->integral && dtype == DType::BOOL && PyBool_Check(object.ptr()) == 0) dtype = DType::I64;
  return full({}, *scalar, dtype);
}

std::vector<int> dims_arg(const py::handle& object) {
  if (object.is_none()) return {};
  if (PyLong_Check(object.ptr())) return {int_arg(object, "dim")};
  if (py::isinstance<py::sequence>(object) && !py::isinstance<py::str>(object)) {
    std::vector<int> dims;
    for (const py::handle item : object) dims.push_back(int_arg(item, "dim"));
    return dims;
  }
  throw TypeError(str("dim must be an int, a sequence of ints or None, not ", type_name(object)));
}

Shape shape_arg(const py::handle& object, const char* op) {
  if (PyLong_Check(object.ptr())) return {int64_arg(object, str(op, ": size"))};
  if (py::isinstance<py::sequence>(object) && !py::isinstance<py::str>(object)) {
    Shape shape;
    for (const py::handle item : object) shape.push_back(int64_arg(item, str(op, ": size")));
    return shape;
  }
  throw TypeError(str(op, ": a shape must be ints or a sequence of ints, not ", type_name(object)));
}

Shape shape_from_args(const py::args& args, const char* op) {
  if (args.size() == 1 && !PyLong_Check(args[0].ptr())) return shape_arg(args[0], op);
  return shape_arg(static_cast<const py::handle&>(args), op);
}

}  // namespace kael::python
