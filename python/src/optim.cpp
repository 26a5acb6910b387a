// kael.optim.SGD / Adam / AdamW and kael.nn.utils.clip_grad_norm_ (python/kael/optim.py and
// nn/utils.py re-export them), with torch's constructor signatures. The native classes are
// registered as _optim_SGD, ... so that they never collide with kael._kael.AdamW, the training
// layer's optimizer (train.cpp), and are renamed kael.optim.SGD, ... for reprs and errors.
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "convert.hpp"
#include "kael/core/error.hpp"
#include "kael/optim/adam.hpp"
#include "kael/optim/clip_grad.hpp"
#include "kael/optim/sgd.hpp"
#include "kael/tensor/autograd.hpp"

namespace py = pybind11;

namespace kael::python {
namespace {

using optim::Optimizer;

// The parameters of an optimizer: any iterable of kael.Tensor, as torch takes them (one group;
// a single tensor is refused, as torch refuses it, rather than iterated row by row).
std::vector<Tensor> params_arg(const py::handle& params, const char* op) {
  if (py::isinstance<Tensor>(params))
    throw TypeError(str(op, ": params must be an iterable of kael.Tensor, not a single Tensor"));
  if (!py::isinstance<py::iterable>(params))
    throw TypeError(str(op, ": params must be an iterable of kael.Tensor, got ",
                        py::type::of(params).attr("__name__").cast<std::string>()));
  std::vector<Tensor> out;
  for (const py::handle item : params) out.push_back(tensor_arg(item, op));
  return out;
}

// Turns grad mode on for the closure of step(), as torch's step does, and back after.
class EnableGrad {
 public:
  EnableGrad() : previous_(autograd::grad_mode_enabled()) { autograd::set_grad_enabled(true); }
  ~EnableGrad() { autograd::set_grad_enabled(previous_); }
  EnableGrad(const EnableGrad&) = delete;
  EnableGrad& operator=(const EnableGrad&) = delete;

 private:
  bool previous_;
};

// The class `cls` shows as kael.optim.<name> (its attribute in _kael is another name).
void present_as(py::object cls, const char* module, const char* name) {
  cls.attr("__name__") = name;
  cls.attr("__qualname__") = name;
  cls.attr("__module__") = module;
}

}  // namespace

void init_optim(py::module_& m) {
  py::class_<Optimizer> base(m, "_optim_Optimizer",
                             "The base of kael.optim's optimizers: one parameter group, torch.optim's semantics.");
  base.def(
          "step",
          [](Optimizer& self, const py::object& closure) -> py::object {
            py::object loss = py::none();
            if (!closure.is_none()) {
              EnableGrad enable;
              loss = closure();
            }
            py::gil_scoped_release release;
            self.step();
            return loss;
          },
          "closure"_a = py::none(),
          "One update of every parameter that has a gradient (in place). A closure, when given, is "
          "called first with grad mode on and its result returned.")
      .def("zero_grad", &Optimizer::zero_grad, "set_to_none"_a = true,
           "Drops every parameter's gradient (set_to_none), or zeroes it in place.")
      .def_property("lr", &Optimizer::lr, &Optimizer::set_lr, "The learning rate (settable, for schedules).")
      .def_property_readonly(
          "params", [](const Optimizer& self) { return std::vector<Tensor>(self.params()); },
          "The parameters, in the order given (handles sharing their storage and gradient).")
      .def("state_dict", &Optimizer::state_dict,
           "The state as a flat dict of tensors (docs/optim.md), ready for kael.save_safetensors.")
      .def(
          "load_state_dict",
          [](Optimizer& self, const py::dict& state) {
            optim::StateDict values;
            for (const auto& [key, value] : state) values[key.cast<std::string>()] = tensor_from_object(value);
            self.load_state_dict(values);
          },
          "state_dict"_a, "Replaces the hyperparameters and state by copies of a state_dict()'s.");

  py::class_<optim::SGD, Optimizer> sgd(m, "_optim_SGD", "torch.optim.SGD (docs/optim.md).");
  sgd.def(py::init([](const py::object& params, double lr, double momentum, double dampening, double weight_decay,
                      bool nesterov) {
            return std::make_unique<optim::SGD>(params_arg(params, "SGD"),
                                                optim::SGDOptions{lr, momentum, dampening, weight_decay, nesterov});
          }),
          "params"_a, "lr"_a = 1e-3, "momentum"_a = 0.0, "dampening"_a = 0.0, "weight_decay"_a = 0.0,
          "nesterov"_a = false);
  present_as(sgd, "kael.optim", "SGD");

  using Betas = std::pair<double, double>;
  py::class_<optim::Adam, Optimizer> adam(m, "_optim_Adam", "torch.optim.Adam (docs/optim.md).");
  adam.def(py::init([](const py::object& params, double lr, Betas betas, double eps, double weight_decay) {
             return std::make_unique<optim::Adam>(params_arg(params, "Adam"),
                                                  optim::AdamOptions{lr, betas, eps, weight_decay});
           }),
           "params"_a, "lr"_a = 1e-3, "betas"_a = Betas{0.9, 0.999}, "eps"_a = 1e-8, "weight_decay"_a = 0.0);
  present_as(adam, "kael.optim", "Adam");

  py::class_<optim::AdamW, optim::Adam> adamw(m, "_optim_AdamW", "torch.optim.AdamW (docs/optim.md).");
  adamw.def(py::init([](const py::object& params, double lr, Betas betas, double eps, double weight_decay) {
              return std::make_unique<optim::AdamW>(params_arg(params, "AdamW"),
                                                    optim::AdamWOptions{lr, betas, eps, weight_decay});
            }),
            "params"_a, "lr"_a = 1e-3, "betas"_a = Betas{0.9, 0.999}, "eps"_a = 1e-8, "weight_decay"_a = 1e-2);
  present_as(adamw, "kael.optim", "AdamW");
  present_as(base, "kael.optim", "Optimizer");

  m.def(
      "clip_grad_norm_",
      [](const py::object& parameters, double max_norm, double norm_type, bool error_if_nonfinite,
         const py::object& /*foreach*/) {
        const std::vector<Tensor> params =
            py::isinstance<Tensor>(parameters) ? std::vector<Tensor>{parameters.cast<Tensor>()}
                                               : params_arg(parameters, "clip_grad_norm_");
        double total = 0;
        {
          py::gil_scoped_release release;
          total = optim::clip_grad_norm_(params, max_norm, norm_type, error_if_nonfinite);
        }
        return full({}, total, DType::F32);
      },
      "parameters"_a, "max_norm"_a, "norm_type"_a = 2.0, "error_if_nonfinite"_a = false, "foreach"_a = py::none(),
      "torch.nn.utils.clip_grad_norm_: scales the gradients in place so that their total norm is at most "
      "max_norm; returns the total norm before (a 0-d tensor). foreach is accepted and ignored.");
}

}  // namespace kael::python
