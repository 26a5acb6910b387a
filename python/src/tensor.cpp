// kael.Tensor: a view of a kael tensor through the buffer protocol, so numpy.asarray(t)
// shares its memory (a mapped tensor stays valid as long as any view of it lives).
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>

#include "bindings.hpp"
#include "convert.hpp"
#include "kael/core/tensor.hpp"

namespace py = pybind11;

namespace kael::python {

namespace {
std::string buffer_format(DType dtype) {
  switch (dtype) {
    case DType::BOOL: return "?";
    case DType::U8: return "B";
    case DType::I8: return "b";
    case DType::I16: return "h";
    case DType::U16: return "H";
    case DType::I32: return "i";
    case DType::U32: return "I";
    case DType::I64: return "q";
    case DType::U64: return "Q";
    case DType::F16: return "e";
    case DType::BF16: return "H";  // numpy has no bfloat16: the raw bits, see Tensor.numpy()
    case DType::F32: return "f";
    case DType::F64: return "d";
  }
  throw TypeError("unknown dtype");
}
}  // namespace

std::optional<DType> dtype_from_numpy(const py::dtype& dtype) {
  const char kind = dtype.kind();
  const auto size = dtype.itemsize();
  if (kind == 'b' && size == 1) return DType::BOOL;
  if (kind == 'u') {
    if (size == 1) return DType::U8;
    if (size == 2) return DType::U16;
    if (size == 4) return DType::U32;
    if (size == 8) return DType::U64;
  }
  if (kind == 'i') {
    if (size == 1) return DType::I8;
    if (size == 2) return DType::I16;
    if (size == 4) return DType::I32;
    if (size == 8) return DType::I64;
  }
  if (kind == 'f') {
    if (size == 2) return DType::F16;
    if (size == 4) return DType::F32;
    if (size == 8) return DType::F64;
  }
  return std::nullopt;
}

Tensor tensor_from_object(const py::handle& object, std::optional<std::string> dtype_name_wanted) {
  if (py::isinstance<Tensor>(object) && !dtype_name_wanted) return object.cast<Tensor>();
  py::module_ numpy = py::module_::import("numpy");
  py::array array = numpy.attr("ascontiguousarray")(object);
  if (!array.dtype().attr("isnative").cast<bool>()) array = array.attr("astype")(array.dtype().attr("newbyteorder")("="));
  std::optional<DType> dtype = dtype_from_numpy(array.dtype());
  if (!dtype) throw TypeError(str("numpy dtype ", std::string(py::str(array.dtype())), " has no safetensors equivalent"));
  Shape shape(array.shape(), array.shape() + array.ndim());
  const auto* begin = static_cast<const std::byte*>(array.data());
  Tensor tensor = Tensor::from_bytes(*dtype, shape, {begin, static_cast<std::size_t>(array.nbytes())});
  if (dtype_name_wanted) {
    auto wanted = kael::dtype_from_name(*dtype_name_wanted);
    if (!wanted) throw TypeError(str("unknown dtype '", *dtype_name_wanted, "'"));
    if (*wanted != *dtype) {
      if (*wanted != DType::F32) throw TypeError(str("kael.tensor converts only to F32, not ", *dtype_name_wanted));
      tensor = tensor.to_f32();
    }
  }
  return tensor;
}

void init_tensor(py::module_& m) {
  py::class_<Tensor>(m, "Tensor", py::buffer_protocol(), R"doc(
An n-dimensional array owned by kael or borrowed from a memory-mapped safetensors file.
numpy.asarray(t) shares its memory (BF16 shows as the raw uint16 bits; use t.numpy()).)doc")
      .def_buffer([](Tensor& t) {
        std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
        std::vector<py::ssize_t> strides;
        for (auto s : t.strides()) strides.push_back(static_cast<py::ssize_t>(s * static_cast<std::int64_t>(t.element_size())));
        return py::buffer_info(t.raw_data(), static_cast<py::ssize_t>(t.element_size()), buffer_format(t.dtype()),
                               t.dim(), shape, strides, /*readonly=*/false);
      })
      .def_property_readonly("shape", [](const Tensor& t) { return py::tuple(py::cast(t.shape())); })
      .def_property_readonly("dtype", [](const Tensor& t) { return std::string(dtype_name(t.dtype())); },
                             "The safetensors dtype name, e.g. 'F32'.")
      .def_property_readonly("numel", &Tensor::numel)
      .def_property_readonly("nbytes", &Tensor::nbytes)
      .def_property_readonly("is_borrowed", &Tensor::is_borrowed,
                             "True when the data points into a memory-mapped file rather than owned memory.")
      .def(
          "numpy",
          [](py::object self) -> py::object {
            const Tensor& t = self.cast<const Tensor&>();
            if (t.dtype() == DType::BF16) {
              Tensor f = t.to_f32();
              return py::module_::import("numpy").attr("array")(py::cast(f), "copy"_a = true);
            }
            return py::module_::import("numpy").attr("asarray")(self);
          },
          "A numpy array of the values: a shared view, except BF16, which is converted to a float32 copy.")
      .def("__array__",
           [](py::object self, py::object dtype, py::object copy) {
             py::object numpy = py::module_::import("numpy");
             py::object view = numpy.attr("asarray")(py::memoryview(self));
             if (!dtype.is_none()) view = view.attr("astype")(dtype, "copy"_a = false);
             if (!copy.is_none() && copy.cast<bool>()) view = view.attr("copy")();
             return view;
           },
           "dtype"_a = py::none(), "copy"_a = py::none())
      .def("__repr__", [](const Tensor& t) {
        return str("kael.Tensor(dtype=", dtype_name(t.dtype()), ", shape=", shape_to_string(t.shape()),
                   t.is_borrowed() ? ", mapped" : "", ")");
      });

  m.def(
      "tensor", [](py::object data, std::optional<std::string> dtype) { return tensor_from_object(data, dtype); },
      "data"_a, "dtype"_a = py::none(),
      "A new kael.Tensor holding a copy of `data` (anything numpy.asarray accepts). dtype='F32' converts.");
}

}  // namespace kael::python
