// kael's C++ errors as Python exceptions: kael.Error (base, I/O and missing things), and
// kael.ValueError / TypeError / IndexError, which also derive from the built-in exception
// of the same name so `except ValueError` catches them.
#include "bindings.hpp"
#include "kael/core/error.hpp"

namespace py = pybind11;

namespace kael::python {

namespace {
PyObject* make_exception(py::module_& m, const char* name, PyObject* base1, PyObject* base2) {
  const std::string qualified = std::string("kael.") + name;
  py::tuple bases = base2 ? py::tuple(py::make_tuple(py::handle(base1), py::handle(base2)))
                          : py::tuple(py::make_tuple(py::handle(base1)));
  PyObject* type = PyErr_NewException(qualified.c_str(), bases.ptr(), nullptr);
  if (type == nullptr) throw py::error_already_set();
  m.add_object(name, py::handle(type));  // the module keeps a reference
  return type;
}
}  // namespace

void init_errors(py::module_& m) {
  static PyObject* error = make_exception(m, "Error", PyExc_RuntimeError, nullptr);
  static PyObject* value_error = make_exception(m, "ValueError", error, PyExc_ValueError);
  static PyObject* type_error = make_exception(m, "TypeError", error, PyExc_TypeError);
  static PyObject* index_error = make_exception(m, "IndexError", error, PyExc_IndexError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const kael::ValueError& e) {
      PyErr_SetString(value_error, e.what());
    } catch (const kael::TypeError& e) {
      PyErr_SetString(type_error, e.what());
    } catch (const kael::IndexError& e) {
      PyErr_SetString(index_error, e.what());
    } catch (const kael::Error& e) {
      PyErr_SetString(error, e.what());
    }
  });
}

}  // namespace kael::python
