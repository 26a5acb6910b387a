// kael.dtype and kael.device: PyTorch's names for kael's element types (kael.float32,
// kael.int64, ...) and devices. A dtype also equals its safetensors name ("F32"), which
// Tensor.dtype returned before it was an object. Arguments named dtype take a kael.dtype, either
// name, or anything numpy.dtype() accepts (np.float32, float, bool).
#include <atomic>
#include <pybind11/operators.h>

#include <array>

#include "bindings.hpp"
#include "convert.hpp"

namespace py = pybind11;

namespace kael::python {

namespace {

struct TorchName {
  DType dtype;
  const char* name;
};
// The first name of each dtype is its canonical one (the repr); the others are aliases.
constexpr TorchName kTorchNames[] = {
    {DType::BOOL, "bool"},    {DType::U8, "uint8"},     {DType::I8, "int8"},       {DType::I16, "int16"},
    {DType::U16, "uint16"},   {DType::I32, "int32"},    {DType::U32, "uint32"},    {DType::I64, "int64"},
    {DType::U64, "uint64"},   {DType::F16, "float16"},  {DType::BF16, "bfloat16"}, {DType::F32, "float32"},
    {DType::F64, "float64"},  {DType::F32, "float"},    {DType::F64, "double"},    {DType::F16, "half"},
    {DType::I64, "long"},     {DType::I32, "int"},      {DType::I16, "short"},
};

const char* torch_name(DType dtype) {
  for (const auto& entry : kTorchNames)
    if (entry.dtype == dtype) return entry.name;
  throw TypeError("unknown dtype");
}

std::optional<DType> dtype_from_any_name(const std::string& name) {
  if (auto dtype = dtype_from_name(name)) return dtype;
  for (const auto& entry : kTorchNames)
    if (name == entry.name) return entry.dtype;
  return std::nullopt;
}

// One Python object per dtype, so `t.dtype is kael.float32` holds as in PyTorch. Never freed:
// they live as long as the interpreter.
std::array<PyObject*, std::size(kAllDTypes)>& dtype_objects() {
  static std::array<PyObject*, std::size(kAllDTypes)> objects{};
  return objects;
}

}  // namespace

std::optional<DType> dtype_from_numpy(const py::dtype& dtype) {
  // Through the Python attributes: the C struct of a numpy dtype changed in numpy 2.
  const std::string kind = dtype.attr("kind").cast<std::string>();
  const int size = dtype.attr("itemsize").cast<int>();
  if (kind == "b" && size == 1) return DType::BOOL;
  if (kind == "u") {
    if (size == 1) return DType::U8;
    if (size == 2) return DType::U16;
    if (size == 4) return DType::U32;
    if (size == 8) return DType::U64;
  }
  if (kind == "i") {
    if (size == 1) return DType::I8;
    if (size == 2) return DType::I16;
    if (size == 4) return DType::I32;
    if (size == 8) return DType::I64;
  }
  if (kind == "f") {
    if (size == 2) return DType::F16;
    if (size == 4) return DType::F32;
    if (size == 8) return DType::F64;
  }
  return std::nullopt;
}

py::object dtype_object(DType dtype) {
  return py::reinterpret_borrow<py::object>(dtype_objects()[static_cast<std::size_t>(dtype)]);
}

std::optional<DType> optional_dtype_arg(const py::handle& object) {
  if (object.is_none()) return std::nullopt;
  if (py::isinstance<DTypeObject>(object)) return object.cast<DTypeObject>().value;
  if (py::isinstance<py::str>(object)) {
    const auto name = utf8_arg(object, "dtype");
    if (auto dtype = dtype_from_any_name(name)) return dtype;
    throw TypeError(str("unknown dtype '", name, "' (kael.float32, 'F32', 'float32', ...)"));
  }
  py::object numpy_dtype;
  try {
    numpy_dtype = py::module_::import("numpy").attr("dtype")(object);
  } catch (const py::error_already_set&) {
    throw TypeError(str("dtype must be a kael.dtype, a name or a numpy dtype, not ",
                        std::string(py::str(py::type::of(object).attr("__name__")))));
  }
  if (auto dtype = dtype_from_numpy(numpy_dtype)) return dtype;
  throw TypeError(str("numpy dtype ", std::string(py::str(numpy_dtype)), " has no kael equivalent"));
}

DType dtype_arg(const py::handle& object, DType default_dtype) {
  return optional_dtype_arg(object).value_or(default_dtype);
}

namespace {
std::atomic<DType> default_float{DType::F32};
}  // namespace

DType default_float_dtype() { return default_float.load(); }
void set_default_float_dtype(DType dtype) { default_float.store(dtype); }

Device device_arg(const py::handle& object) {
  if (py::isinstance<Device>(object)) return object.cast<Device>();
  if (py::isinstance<py::str>(object)) return parse_device(utf8_arg(object, "device"));
  throw TypeError(str("device must be a kael.device or a name such as 'cpu', not ",
                      std::string(py::str(py::type::of(object).attr("__name__")))));
}

void init_dtype(py::module_& m) {
  py::class_<DTypeObject>(m, "dtype", "An element type: kael.float32, kael.int64, kael.bool, ...")
      .def_property_readonly("is_floating_point", [](const DTypeObject& d) { return is_floating(d.value); })
      .def_property_readonly("itemsize", [](const DTypeObject& d) { return dtype_size(d.value); })
      .def_property_readonly("safetensors_name", [](const DTypeObject& d) { return std::string(dtype_name(d.value)); },
                             "The name safetensors headers use, e.g. 'F32'.")
      .def("__eq__", [](const DTypeObject& d, const DTypeObject& other) { return d.value == other.value; })
      .def("__eq__",
           [](const DTypeObject& d, const std::string& name) {
             const auto other = dtype_from_any_name(name);
             return other && *other == d.value;
           })
      .def("__eq__",
           [](const DTypeObject& d, const py::object& other) {
             try {  // a numpy dtype or type: t.dtype == np.float32
               const auto dtype = optional_dtype_arg(other);
               return dtype && *dtype == d.value;
             } catch (const Error&) {
               return false;
             }
           })
      .def("__hash__", [](const DTypeObject& d) { return static_cast<int>(d.value); })
      .def("__repr__", [](const DTypeObject& d) { return str("kael.", torch_name(d.value)); })
      .def(py::pickle([](const DTypeObject& d) { return std::string(dtype_name(d.value)); },
                      [](const std::string& name) { return DTypeObject{*dtype_from_name(name)}; }));
  for (DType dtype : kAllDTypes) {
    py::object object = py::cast(DTypeObject{dtype});
    dtype_objects()[static_cast<std::size_t>(dtype)] = object.release().ptr();
  }
  for (const auto& entry : kTorchNames) m.attr(entry.name) = dtype_object(entry.dtype);

  py::class_<Device>(m, "device", "Where a tensor's values live: kael.device('cpu'), kael.device('cuda:0') (kael.cuda says which are usable).")
      .def(py::init([](const std::string& name) { return parse_device(name); }), "name"_a)
      .def_property_readonly("type", [](const Device& d) { return d.type == Device::Type::cpu ? "cpu" : "cuda"; })
      .def_property_readonly("index", [](const Device& d) -> py::object {
        if (d.type == Device::Type::cpu) return py::none();
        return py::int_(d.index);
      })
      .def("__eq__", [](const Device& d, const Device& other) { return d == other; })
      .def("__eq__", [](const Device& d, const std::string& name) { return d.str() == name; })
      .def("__eq__", [](const Device&, const py::object&) { return false; })
      .def("__hash__", [](const Device& d) { return py::hash(py::str(d.str())); })
      .def("__str__", &Device::str)
      .def("__repr__", [](const Device& d) {
        return d.type == Device::Type::cpu ? std::string("device(type='cpu')") : str("device(type='cuda', index=", d.index, ")");
      });
}

}  // namespace kael::python
