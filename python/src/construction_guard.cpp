// Python can call a bound class's __new__ without its __init__ (`Model.__new__(Model)`): the
// object then holds no C++ value, and pybind11 hands its methods a null `this`, so the first
// method call crashed the interpreter. Every class of the module refuses that with a TypeError
// at __new__; `Cls(...)` and the functions that return objects still construct them, because
// they reach the type's allocation slot, not the __new__ attribute.
#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "bindings.hpp"

namespace py = pybind11;

namespace kael::python {

namespace {

// Whether `type` is a class pybind11 registered (its metaclass is pybind11's) that still allocates
// with pybind11's own __new__ (kael.Tensor has one that makes a whole empty tensor).
bool allocates_without_value(PyTypeObject* type) {
  const auto& internals = py::detail::get_internals();
  return Py_TYPE(reinterpret_cast<PyObject*>(type)) == internals.default_metaclass &&
         type->tp_new == reinterpret_cast<PyTypeObject*>(internals.instance_base)->tp_new;
}

// A class unpickled by pickle's protocol 2 is made with cls.__new__(cls) and filled by
// __setstate__: it must keep a working __new__.
bool unpickles_through_new(const py::handle& type) { return py::hasattr(type, "__setstate__"); }

using Guarded = std::shared_ptr<const std::unordered_set<PyObject*>>;

// Gives `type` a __new__ attribute that refuses the bound classes (`_NativeModule.__new__(_GPT)`
// too) and allocates the Python subclasses of `type`.
void install_refusing_new(PyTypeObject* type, newfunc allocate, const Guarded& guarded) {
  py::cpp_function refuse(
      [allocate, guarded](py::handle cls, py::args args, py::kwargs kwargs) -> py::object {
        if (guarded->count(cls.ptr()) != 0) {
          const std::string name = reinterpret_cast<PyTypeObject*>(cls.ptr())->tp_name;
          throw py::type_error(name + ".__new__ would make an object without its C++ value: call " + name +
                               "(...) or the function that returns one");
        }
        // A Python subclass constructs through here: its __init__ runs next.
        PyObject* made = allocate(reinterpret_cast<PyTypeObject*>(cls.ptr()), args.ptr(), kwargs.ptr());
        if (made == nullptr) throw py::error_already_set();
        return py::reinterpret_steal<py::object>(made);
      },
      py::name("__new__"));
  auto as_static = py::reinterpret_steal<py::object>(PyStaticMethod_New(refuse.ptr()));
  if (!as_static || PyObject_SetAttrString(reinterpret_cast<PyObject*>(type), "__new__", as_static.ptr()) != 0)
    throw py::error_already_set();
}

}  // namespace

void guard_construction(py::module_& m) {
  // Chosen before any changes: setting a base's __new__ also repoints its subclasses' slots.
  std::vector<PyTypeObject*> types;
  for (const auto& item : m.attr("__dict__").cast<py::dict>()) {
    if (!PyType_Check(item.second.ptr())) continue;
    auto* type = reinterpret_cast<PyTypeObject*>(item.second.ptr());
    if (allocates_without_value(type) && !unpickles_through_new(item.second)) types.push_back(type);
  }
  auto guarded = std::make_shared<std::unordered_set<PyObject*>>();
  for (PyTypeObject* type : types) guarded->insert(reinterpret_cast<PyObject*>(type));
  const newfunc allocate = reinterpret_cast<PyTypeObject*>(py::detail::get_internals().instance_base)->tp_new;
  for (PyTypeObject* type : types) install_refusing_new(type, allocate, guarded);
  // Setting __new__ pointed each allocation slot at the Python attribute; `Cls(...)` keeps
  // pybind11's allocation, which every bound constructor follows with its __init__ check.
  for (PyTypeObject* type : types) {
    type->tp_new = allocate;
    PyType_Modified(type);
  }
}

}  // namespace kael::python
