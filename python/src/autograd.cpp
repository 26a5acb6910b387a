// Autograd in Python: requires_grad, .grad, backward(), .grad_fn, and the grad mode that
// kael.no_grad() / enable_grad() / set_grad_enabled() (python/kael/autograd.py) switch.
#include <pybind11/stl.h>

#include <atomic>

#include "bindings.hpp"
#include "convert.hpp"
#include "kael/tensor/autograd.hpp"

namespace py = pybind11;

namespace kael::python {

namespace {

// A Python callable kept by C++ (a hook): called and released with the GIL held, whichever
// thread runs the backward.
std::shared_ptr<py::object> held(py::object object) {
  return std::shared_ptr<py::object>(new py::object(std::move(object)), [](py::object* p) {
    if (!Py_IsInitialized()) return;
    py::gil_scoped_acquire gil;
    delete p;
  });
}

// What register_hook returns: remove() turns the hook off (torch's RemovableHandle).
// `active` is atomic: a backward on another thread may read it while remove() runs.
struct HookHandle {
  std::shared_ptr<std::atomic<bool>> active = std::make_shared<std::atomic<bool>>(true);
  void remove() { *active = false; }
};

}  // namespace

void init_autograd(py::module_& m) {
  auto cls = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  py::class_<autograd::Node, std::shared_ptr<autograd::Node>>(m, "Node", "The op that made a tensor, for its backward.")
      .def("name", [](const autograd::Node& node) { return node.name; })
      .def("__repr__", [](const autograd::Node& node) { return str("<kael.Node ", node.name, ">"); });
  cls.def_property("requires_grad", &Tensor::requires_grad,
                   [](Tensor& t, bool enabled) { t.requires_grad_(enabled); })
      .def("requires_grad_",
           [](py::object self, bool enabled) {
             self.cast<Tensor&>().requires_grad_(enabled);
             return self;
           },
           "requires_grad"_a = true)
      .def_property("grad", [](const Tensor& t) -> py::object {
        const Tensor grad = t.grad();
        return tensor_or_none(grad);
      }, [](Tensor& t, const py::object& value) {
        t.set_grad(value.is_none() ? Tensor() : tensor_arg(value, "grad"));
      }, "The gradient backward() accumulated in this leaf; None until then.")
      .def_property_readonly("is_leaf", &Tensor::is_leaf)
      .def_property_readonly("grad_fn", [](const Tensor& t) -> py::object {
        const auto& meta = t.autograd_meta();
        return meta && meta->grad_fn ? py::cast(meta->grad_fn) : py::none();
      })
      .def(
          "backward",
          [](const Tensor& t, const std::optional<Tensor>& gradient, bool retain_graph) {
            py::gil_scoped_release release;
            t.backward(gradient.value_or(Tensor()), retain_graph);
          },
          "gradient"_a = py::none(), "retain_graph"_a = false,
          "Accumulates d(self)/d(leaf) in every leaf's .grad; without `gradient` self must hold one element. "
          "The graph is freed after, unless retain_graph.")
      .def("zero_grad", &Tensor::zero_grad, "Drops the gradient (grad becomes None).")
      .def("retain_grad", [](const Tensor& t) { autograd::retain_grad(t); },
           "Keeps this non-leaf's gradient in .grad after a backward.")
      .def(
          "register_hook",
          [](const Tensor& t, const py::object& hook) {
            if (!PyCallable_Check(hook.ptr())) throw py::type_error("register_hook: the hook must be callable");
            HookHandle handle;
            auto fn = held(hook);
            autograd::register_hook(t, [fn, active = handle.active](const Tensor& g) -> Tensor {
              if (!*active) return Tensor();
              py::gil_scoped_acquire gil;
              const py::object result = (*fn)(g);
              if (result.is_none()) return Tensor();
              return tensor_arg(result, "register_hook");
            });
            return handle;
          },
          "hook"_a, "hook(grad) runs in every backward; a tensor it returns replaces the gradient. Returns a handle with remove().");

  py::class_<HookHandle>(m, "_RemovableHandle", "What register_hook returns: remove() turns the hook off.")
      .def("remove", &HookHandle::remove);

  m.def(
      "_autograd_grad",
      [](const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs, const std::vector<std::optional<Tensor>>& grad_outputs,
         bool retain_graph, bool allow_unused) {
        std::vector<Tensor> seeds;
        for (const auto& g : grad_outputs) seeds.push_back(g.value_or(Tensor()));
        std::vector<Tensor> grads;
        {
          py::gil_scoped_release release;
          grads = autograd::grad(outputs, inputs, seeds, retain_graph, allow_unused);
        }
        py::list out;
        for (const Tensor& g : grads) out.append(tensor_or_none(g));
        return py::tuple(out);
      },
      "outputs"_a, "inputs"_a, "grad_outputs"_a, "retain_graph"_a, "allow_unused"_a);

  m.def("is_grad_enabled", &autograd::grad_mode_enabled);
  m.def("_set_grad_enabled", &autograd::set_grad_enabled, "mode"_a);
}

}  // namespace kael::python
