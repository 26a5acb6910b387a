// kael.Tensor: the tensor library's Tensor in Python. Its memory is shared with NumPy both ways
// (the buffer protocol, numpy(), kael.from_numpy); kael.tensor copies. This file holds the class,
// creation and conversions; tensor_math.cpp, tensor_index.cpp and autograd.cpp add the rest.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <sstream>

#include "bindings.hpp"
#include "convert.hpp"

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

py::object numpy_module() { return py::module_::import("numpy"); }

// A C-contiguous native-order numpy copy of `object` and its kael dtype.
std::pair<py::array, DType> numpy_copy_source(const py::handle& object) {
  // asarray, not ascontiguousarray, which turns a 0-d array into a 1-d one.
  py::array array = numpy_module().attr("asarray")(object, "order"_a = "C");
  if (!array.dtype().attr("isnative").cast<bool>()) array = array.attr("astype")(array.dtype().attr("newbyteorder")("="));
  std::optional<DType> dtype = dtype_from_numpy(array.dtype());
  if (!dtype) throw TypeError(str("numpy dtype ", std::string(py::str(array.dtype())), " has no kael equivalent"));
  return {array, *dtype};
}

Tensor copy_of_array(const py::array& array, DType dtype) {
  Shape shape(array.shape(), array.shape() + array.ndim());
  const auto* begin = static_cast<const std::byte*>(array.data());
  return Tensor::from_bytes(dtype, shape, {begin, static_cast<std::size_t>(array.nbytes())});
}

// kael.tensor(data): PyTorch's torch.tensor. Python floats become F32 (PyTorch's default
// dtype), ints I64, bools BOOL; a numpy array keeps its dtype. Always a copy.
Tensor new_tensor(const py::handle& data, const py::handle& dtype, bool requires_grad) {
  Tensor tensor;
  if (py::isinstance<Tensor>(data)) {
    tensor = data.cast<Tensor>().detach().clone();
  } else {
    const bool from_python = !py::isinstance<py::array>(data) && !py::hasattr(data, "__array_interface__");
    auto [array, kind] = numpy_copy_source(data);
    tensor = copy_of_array(array, kind);
    if (from_python && kind == DType::F64) tensor = tensor.to(default_float_dtype());
  }
  if (auto wanted = optional_dtype_arg(dtype)) tensor = tensor.to(*wanted);
  if (requires_grad) tensor.requires_grad_(true);
  return tensor;
}

// Keeps a numpy array alive for the tensors that borrow its memory; the last one to go may be
// released on a thread without the GIL.
std::shared_ptr<void> hold(py::object object) {
  return std::shared_ptr<void>(new py::object(std::move(object)), [](void* p) {
    if (!Py_IsInitialized()) return;  // the interpreter is gone: nothing left to release
    py::gil_scoped_acquire gil;
    delete static_cast<py::object*>(p);
  });
}

// kael.from_numpy: a tensor over the array's memory (no copy), as torch.from_numpy.
Tensor from_numpy(const py::array& array) {
  std::optional<DType> dtype = dtype_from_numpy(array.dtype());
  if (!dtype) throw TypeError(str("from_numpy: numpy dtype ", std::string(py::str(array.dtype())), " has no kael equivalent"));
  if (!array.dtype().attr("isnative").cast<bool>())
    throw TypeError("from_numpy: the array is not in native byte order (use array.astype(array.dtype.newbyteorder('=')))");
  if (!array.writeable())
    throw ValueError("from_numpy: the array is read-only, and the tensor would share its memory (kael.tensor(array) copies)");
  const auto itemsize = static_cast<py::ssize_t>(dtype_size(*dtype));
  Shape shape;
  std::vector<std::int64_t> strides;
  std::int64_t extent = 1;  // elements from the first to the last one, inclusive
  bool empty = false;
  for (py::ssize_t d = 0; d < array.ndim(); ++d) {
    const auto stride = array.strides(d);
    if (stride < 0 || stride % itemsize != 0)
      throw ValueError(str("from_numpy: stride ", stride, " bytes of dim ", d,
                           " is negative or not a multiple of the element size (copy with kael.tensor)"));
    shape.push_back(array.shape(d));
    strides.push_back(stride / itemsize);
    if (array.shape(d) == 0) empty = true;
    else extent += (array.shape(d) - 1) * (stride / itemsize);
  }
  if (empty) return zeros(shape, *dtype);
  auto* data = static_cast<std::byte*>(const_cast<void*>(array.data()));
  return Tensor::borrow(*dtype, {extent}, data, hold(array)).as_strided(shape, strides);
}

// The values of a floating or integer tensor as a nested Python list.
py::object to_list(const Tensor& t) {
  if (t.device().type != Device::Type::cpu) return to_list(t.detach().cpu());  // one copy to the host
  if (t.dim() == 0) return py::cast(t).attr("item")();
  py::list out;
  for (std::int64_t i = 0; i < t.size(0); ++i) out.append(to_list(t.select(0, i)));
  return out;
}

py::object item(const Tensor& t) {
  if (t.numel() != 1)
    throw ValueError(str("item: a tensor with ", t.numel(), " elements (shape ", shape_to_string(t.shape()),
                         ") has no single value"));
  if (t.device().type != Device::Type::cpu) return item(t.detach().cpu());
  if (t.dtype() == DType::BOOL) return py::bool_(t.item<bool>());
  if (is_floating(t.dtype())) return py::float_(t.to(DType::F64).item<double>());
  if (t.dtype() == DType::U64) return py::int_(*reinterpret_cast<const std::uint64_t*>(t.contiguous().raw_data()));
  return py::int_(t.to(DType::I64).item<std::int64_t>());
}

std::string repr(const Tensor& t) {
  std::ostringstream out;
  out << t;
  return out.str();
}

Tensor converted(const Tensor& t, DType dtype) { return t.to(dtype); }

bool is_dtype_name(const py::handle& name) {
  try {
    optional_dtype_arg(name);
    return true;
  } catch (const TypeError&) {
    return false;
  }
}

// kael.as_tensor: shares the memory of a tensor or a numpy array where it can, else copies.
Tensor as_tensor(const py::object& data, const py::object& dtype) {
  Tensor t;
  if (py::isinstance<Tensor>(data)) {
    t = data.cast<Tensor>();
  } else if (py::isinstance<py::array>(data)) {
    try {
      t = from_numpy(data.cast<py::array>());
    } catch (const Error&) {  // read-only, reversed strides, byte-swapped: a copy
      t = new_tensor(data, py::none(), false);
    }
  } else {
    t = new_tensor(data, py::none(), false);
  }
  if (auto wanted = optional_dtype_arg(dtype)) t = t.to(*wanted);
  return t;
}

// torch's rule for numpy(): a tensor that requires grad shares no memory with NumPy, since a
// write through it would be invisible to autograd (no version bump) and give a wrong gradient.
constexpr const char* kRequiresGradNumpy =
    "a tensor that requires grad has no numpy view or buffer (a write through it would bypass autograd); use "
    "tensor.detach().numpy()";

// torch's rule and words for a tensor on a device: NumPy reads host memory only.
std::string device_numpy_message(const Tensor& t) {
  return str("can't convert ", t.device().str(), " device type tensor to numpy. Use Tensor.cpu() to copy the tensor to "
             "host memory first.");
}

void refuse_numpy_unless_host_values(const Tensor& t) {
  if (t.device().type != Device::Type::cpu) throw TypeError(device_numpy_message(t));
  if (t.requires_grad()) throw TypeError(kRequiresGradNumpy);
}

// numpy.asarray(t) and memoryview(t) reach the buffer protocol. pybind11 before 2.13.6 (the
// build allows 2.12) ends the process on an exception from def_buffer's function, so the type's
// slot checks first and then hands over to pybind11's.
getbufferproc pybind11_getbuffer_slot = nullptr;

int tensor_getbuffer(PyObject* self, Py_buffer* view, int flags) {
  bool requires_grad = false;
  std::string on_device;  // the refusal for a tensor that is not on the CPU
  try {
    const Tensor& t = py::handle(self).cast<const Tensor&>();
    requires_grad = t.requires_grad();
    if (t.device().type != Device::Type::cpu) on_device = device_numpy_message(t);
  } catch (...) {
    view->obj = nullptr;
    PyErr_SetString(PyExc_BufferError, "kael.Tensor: no buffer for this object");
    return -1;
  }
  if (!on_device.empty()) {
    view->obj = nullptr;
    PyErr_SetString(PyExc_BufferError, on_device.c_str());
    return -1;
  }
  if (requires_grad) {
    view->obj = nullptr;
    PyErr_SetString(PyExc_BufferError, kRequiresGradNumpy);
    return -1;
  }
  return pybind11_getbuffer_slot(self, view, flags);
}

void install_buffer_check(const py::handle& cls) {
  auto* type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  pybind11_getbuffer_slot = type->tp_as_buffer->bf_getbuffer;
  type->tp_as_buffer->bf_getbuffer = &tensor_getbuffer;
}

// Pickling: the bytes, dtype, shape and requires_grad, rebuilt by kael._kael._rebuild_tensor
// (exact for every dtype, BF16 included). Not __getstate__/__setstate__: those need a
// kael.Tensor made by __new__ and filled later, and __new__ makes a whole tensor (below).
py::tuple reduce(const py::object& self) {
  const Tensor t = self.cast<const Tensor&>().detach().contiguous();
  const auto bytes = t.bytes();
  py::bytes data(reinterpret_cast<const char*>(bytes.data()), static_cast<py::ssize_t>(bytes.size()));
  return py::make_tuple(py::module_::import("kael._kael").attr("_rebuild_tensor"),
                        py::make_tuple(data, std::string(dtype_name(t.dtype())), py::tuple(py::cast(t.shape())),
                                       self.cast<const Tensor&>().requires_grad()));
}

Tensor rebuild_tensor(const py::bytes& data, const std::string& dtype, const py::object& shape, bool requires_grad) {
  const std::string_view bytes = data;
  Tensor t = Tensor::from_bytes(dtype_arg(py::str(dtype), DType::F32), shape_arg(shape, "_rebuild_tensor"),
                                {reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()});
  if (requires_grad) t.requires_grad_(true);
  return t;
}

// Tensor.__new__ returns an empty float32 tensor, as torch.Tensor.__new__ does, never an object
// without a value: pybind11 would hand methods uninitialized memory for one (a crafted pickle
// reaches __new__ through copyreg.__newobj__).
void install_whole_new(py::class_<Tensor>& cls) {
  const newfunc base_new = reinterpret_cast<PyTypeObject*>(cls.ptr())->tp_new;
  cls.attr("__new__") = py::staticmethod(py::cpp_function(
      [base_new](const py::handle& type, const py::args& args, const py::kwargs& kwargs) {
        if (!args.empty() || !kwargs.empty())
          throw TypeError("kael.Tensor() takes no arguments and gives an empty float32 tensor; use kael.tensor(data), "
                          "kael.empty(size) or kael.zeros(size)");
        if (!PyType_Check(type.ptr()) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(type.ptr()),
                                                          reinterpret_cast<PyTypeObject*>(py::type::of<Tensor>().ptr())))
          throw TypeError("kael.Tensor.__new__(X): X must be kael.Tensor");
        auto self = py::reinterpret_steal<py::object>(base_new(reinterpret_cast<PyTypeObject*>(type.ptr()),
                                                               py::tuple().ptr(), nullptr));
        if (!self) throw py::error_already_set();
        self.attr("__init__")();  // constructs the value; the __init__ that follows is a no-op
        return self;
      },
      py::name("__new__")));
}

}  // namespace

Tensor tensor_from_object(const py::handle& object, std::optional<std::string> dtype_name_wanted) {
  if (py::isinstance<Tensor>(object) && !dtype_name_wanted) return object.cast<Tensor>();
  auto [array, dtype] = numpy_copy_source(object);
  Tensor tensor = copy_of_array(array, dtype);
  if (dtype_name_wanted) tensor = tensor.to(dtype_arg(py::str(*dtype_name_wanted), dtype));
  return tensor;
}

void init_tensor(py::module_& m) {
  py::class_<Tensor> cls(m, "Tensor", py::buffer_protocol(), R"doc(
An n-dimensional array with PyTorch's operations and autograd, owned by kael or borrowing the
memory of a numpy array or a memory-mapped safetensors file. numpy.asarray(t) shares its memory
(BF16 shows as the raw uint16 bits; use t.numpy()), unless t requires grad: then, as t.numpy(),
it is refused (use t.detach()).)doc");
  cls.def(py::init([] { return Tensor::zeros(DType::F32, {0}); }), "An empty float32 tensor, as torch.Tensor().");
  cls.def_buffer([](Tensor& t) {
    std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
    std::vector<py::ssize_t> strides;
    for (auto s : t.strides()) strides.push_back(static_cast<py::ssize_t>(s * static_cast<std::int64_t>(t.element_size())));
    return py::buffer_info(t.raw_data(), static_cast<py::ssize_t>(t.element_size()), buffer_format(t.dtype()), t.dim(),
                           shape, strides, /*readonly=*/false);
  });
  cls.def_property_readonly("shape", [](const Tensor& t) { return py::tuple(py::cast(t.shape())); })
      .def_property_readonly("dtype", [](const Tensor& t) { return dtype_object(t.dtype()); },
                             "The element type, a kael.dtype (equal to its safetensors name too: t.dtype == 'F32').")
      .def_property_readonly("device", &Tensor::device)
      .def_property_readonly("ndim", &Tensor::dim)
      .def_property_readonly("nbytes", &Tensor::nbytes)
      .def_property_readonly("itemsize", &Tensor::element_size)
      .def_property_readonly("is_borrowed", &Tensor::is_borrowed,
                             "True when the data belongs to something else (a numpy array, a mapped file).")
      .def("size", [](const Tensor& t) { return py::tuple(py::cast(t.shape())); })
      .def("size", [](const Tensor& t, int dim) { return t.size(dim); }, "dim"_a)
      .def("dim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def("element_size", &Tensor::element_size)
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("is_floating_point", [](const Tensor& t) { return is_floating(t.dtype()); })
      .def("contiguous", &Tensor::contiguous, "The tensor itself if contiguous, else a contiguous copy.")
      .def("clone", &Tensor::clone)
      .def("detach", &Tensor::detach, "The same values, cut from the graph (shares memory).")
      .def("item", &item, "The value of a one-element tensor as a Python bool, int or float.")
      .def("tolist", &to_list)
      .def(
          "numpy",
          [](py::object self) -> py::object {
            const Tensor& t = self.cast<const Tensor&>();
            refuse_numpy_unless_host_values(t);
            if (t.dtype() == DType::BF16) return numpy_module().attr("array")(py::cast(t.to(DType::F32)), "copy"_a = true);
            return numpy_module().attr("asarray")(self);
          },
          "A numpy array sharing the memory (BF16: a float32 copy, numpy has no bfloat16).")
      .def("__array__",
           [](py::object self, py::object dtype, py::object copy) {
             refuse_numpy_unless_host_values(self.cast<const Tensor&>());
             py::object view = numpy_module().attr("asarray")(py::memoryview(self));
             if (!dtype.is_none()) view = view.attr("astype")(dtype, "copy"_a = false);
             if (!copy.is_none() && copy.cast<bool>()) view = view.attr("copy")();
             return view;
           },
           "dtype"_a = py::none(), "copy"_a = py::none())
      .def(
          "to",
          [](const Tensor& t, const py::object& target, const py::object& dtype, const py::object& device,
             bool /*non_blocking*/, bool copy) {
            // torch's forms: to(dtype), to(device), to(device, dtype), to(other), to(device=, dtype=).
            Tensor out = t;
            if (!target.is_none()) {
              if (py::isinstance<Tensor>(target)) {
                out = out.to(target.cast<Tensor>().dtype());
              } else if (py::isinstance<Device>(target) ||
                         (py::isinstance<py::str>(target) && !is_dtype_name(target))) {
                out = out.to(device_arg(target));  // an unknown name is a ValueError naming the device
              } else {
                out = out.to(dtype_arg(target, t.dtype()));
              }
            }
            if (!device.is_none()) out = out.to(device_arg(device));
            if (!dtype.is_none()) out = out.to(dtype_arg(dtype, t.dtype()));
            if (copy && out.device_raw_data() == t.device_raw_data()) out = out.clone();
            return out;
          },
          "device_or_dtype"_a = py::none(), "dtype"_a = py::none(), py::kw_only(), "device"_a = py::none(),
          "non_blocking"_a = false, "copy"_a = false,
          "t.to(kael.float64), t.to('cpu'), t.to('cpu', kael.float64), t.to(device=..., dtype=...); the tensor itself "
          "when nothing changes.")
      .def("cpu", &Tensor::cpu)
      .def(
          "cuda",
          [](const Tensor& t, const py::object& device) {
            return t.to(device.is_none() ? Device{Device::Type::cuda, 0} : device_arg(device));
          },
          "device"_a = py::none(), "A copy on a CUDA device (cuda:0 by default), as torch's Tensor.cuda().")
      .def("float", [](const Tensor& t) { return converted(t, DType::F32); })
      .def("double", [](const Tensor& t) { return converted(t, DType::F64); })
      .def("half", [](const Tensor& t) { return converted(t, DType::F16); })
      .def("bfloat16", [](const Tensor& t) { return converted(t, DType::BF16); })
      .def("long", [](const Tensor& t) { return converted(t, DType::I64); })
      .def("int", [](const Tensor& t) { return converted(t, DType::I32); })
      .def("bool", [](const Tensor& t) { return converted(t, DType::BOOL); })
      .def("__len__",
           [](const Tensor& t) {
             if (t.dim() == 0) throw py::type_error("len() of a 0-d tensor");
             return t.size(0);
           })
      .def("__bool__", [](const Tensor& t) {
        if (t.numel() != 1)
          throw ValueError(str("the truth value of a tensor with ", t.numel(), " elements is ambiguous"));
        return t.to(DType::BOOL).item<bool>();
      })
      .def("__float__", [](const Tensor& t) { return item(t).cast<double>(); })
      .def("__int__", [](const Tensor& t) { return py::int_(item(t)); })
      .def("__index__", [](const Tensor& t) {
        if (is_floating(t.dtype()) || t.dtype() == DType::BOOL)
          throw py::type_error("only integer tensors of a single element can be used as an index");
        return item(t);
      })
      .def("__hash__", [](const py::object& self) { return py::hash(py::int_(reinterpret_cast<std::intptr_t>(self.ptr()))); })
      .def("__repr__", &repr)
      .def("__reduce__", &reduce);
  install_buffer_check(cls);
  install_whole_new(cls);
  m.def("_rebuild_tensor", &rebuild_tensor, "data"_a, "dtype"_a, "shape"_a, "requires_grad"_a,
        "Unpickles a kael.Tensor (see Tensor.__reduce__).");

  m.def(
      "tensor",
      [](const py::object& data, const py::object& dtype, const py::object& device, bool requires_grad) {
        if (device.is_none()) return new_tensor(data, dtype, requires_grad);
        Tensor t = new_tensor(data, dtype, false).to(device_arg(device));
        if (requires_grad) t.requires_grad_(true);
        return t;
      },
      "data"_a, "dtype"_a = py::none(), "device"_a = py::none(), "requires_grad"_a = false,
      "A new tensor holding a copy of `data` (a number, nested lists, a numpy array or a tensor). "
      "Python floats give float32, ints int64, bools bool; numpy arrays keep their dtype.");
  m.def("from_numpy", &from_numpy, "array"_a,
        "A tensor sharing the memory of a numpy array (writes show on both sides); the array stays alive "
        "as long as the tensor.");
  m.def("as_tensor", &as_tensor, "data"_a, "dtype"_a = py::none(),
        "Shares memory with a tensor or a numpy array when it can (and the dtype matches), else copies.");
}

}  // namespace kael::python
