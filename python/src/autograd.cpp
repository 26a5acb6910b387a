// Autograd in Python: requires_grad, .grad, backward(), .grad_fn, and the grad mode that
// kael.no_grad() / enable_grad() / set_grad_enabled() (python/kael/autograd.py) switch.
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "convert.hpp"
#include "kael/tensor/autograd.hpp"

namespace py = pybind11;

namespace kael::python {

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
        return grad.defined() ? py::cast(grad) : py::none();
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
      .def("zero_grad", &Tensor::zero_grad, "Drops the gradient (grad becomes None).");

  m.def("is_grad_enabled", &autograd::grad_mode_enabled);
  m.def("_set_grad_enabled", &autograd::set_grad_enabled, "mode"_a);
}

}  // namespace kael::python
