// The native half of kael.optim.SGD / Adam / AdamW (python/kael/optim.py holds the classes
// with torch's signatures and param_groups) and kael.nn.utils.clip_grad_norm_. Registered as
// _optim_SGD, ... (underscored: the public names are kael.optim's Python classes).
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "convert.hpp"
#include "kael/core/error.hpp"
#include "kael/optim/adadelta.hpp"
#include "kael/optim/adam.hpp"
#include "kael/optim/clip_grad.hpp"
#include "kael/optim/rmsprop.hpp"
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

// The parameter groups python/kael/optim.py passes: (params, options) pairs, each dict holding
// every option of the optimizer (the defaults filled in there).
template <class Options, class Fill>
std::vector<optim::ParamGroup<Options>> groups_arg(const py::list& groups, const char* op, Fill fill) {
  std::vector<optim::ParamGroup<Options>> out;
  for (const py::handle item : groups) {
    const auto pair = item.cast<py::tuple>();
    optim::ParamGroup<Options> group{params_arg(pair[0], op), {}};
    const auto options = pair[1].cast<py::dict>();
    fill(group.options, options);
    out.push_back(std::move(group));
  }
  return out;
}

double option(const py::dict& options, const char* name) { return options[name].cast<double>(); }

}  // namespace

void init_optim(py::module_& m) {
  py::class_<Optimizer> base(m, "_optim_Optimizer",
                             "The native half of kael.optim's optimizers: parameter groups, torch.optim's updates.");
  base.def(
          "step",
          [](Optimizer& self) {
            py::gil_scoped_release release;
            self.step();
          },
          "One update of every parameter that has a gradient (in place).")
      .def("zero_grad", &Optimizer::zero_grad, "set_to_none"_a = true,
           "Drops every parameter's gradient (set_to_none), or zeroes it in place.")
      .def_property("lr", &Optimizer::lr, &Optimizer::set_lr, "The first group's learning rate; setting sets every group's.")
      .def_property_readonly("num_groups", &Optimizer::num_groups)
      .def("group_lr", &Optimizer::group_lr, "group"_a)
      .def("set_group_lr", &Optimizer::set_group_lr, "group"_a, "lr"_a)
      .def_property_readonly(
          "params", [](const Optimizer& self) { return std::vector<Tensor>(self.params()); },
          "The parameters, group after group (handles sharing their storage and gradient).")
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

  using Betas = std::pair<double, double>;
  py::class_<optim::SGD, Optimizer> sgd(m, "_optim_SGD", "torch.optim.SGD's update (docs/optim.md).");
  sgd.def(py::init([](const py::list& groups) {
            return std::make_unique<optim::SGD>(groups_arg<optim::SGDOptions>(groups, "SGD", [](optim::SGDOptions& o, const py::dict& d) {
              o = {option(d, "lr"), option(d, "momentum"), option(d, "dampening"), option(d, "weight_decay"),
                   d["nesterov"].cast<bool>()};
            }));
          }),
          "groups"_a)
      .def("options", [](const optim::SGD& self, std::size_t g) {
        const auto o = self.options(g);
        return py::dict("lr"_a = o.lr, "momentum"_a = o.momentum, "dampening"_a = o.dampening,
                        "weight_decay"_a = o.weight_decay, "nesterov"_a = o.nesterov);
      }, "group"_a);
  const auto adam_fill = [](optim::AdamOptions& o, const py::dict& d) {
    o = {option(d, "lr"), d["betas"].cast<Betas>(), option(d, "eps"), option(d, "weight_decay")};
  };
  const auto adam_options = [](const optim::AdamOptions& o) {
    return py::dict("lr"_a = o.lr, "betas"_a = py::make_tuple(o.betas.first, o.betas.second), "eps"_a = o.eps,
                    "weight_decay"_a = o.weight_decay);
  };
  py::class_<optim::Adam, Optimizer> adam(m, "_optim_Adam", "torch.optim.Adam's update (docs/optim.md).");
  adam.def(py::init([adam_fill](const py::list& groups) {
             return std::make_unique<optim::Adam>(groups_arg<optim::AdamOptions>(groups, "Adam", adam_fill));
           }),
           "groups"_a)
      .def("options", [adam_options](const optim::Adam& self, std::size_t g) { return adam_options(self.options(g)); }, "group"_a);
  py::class_<optim::AdamW, optim::Adam> adamw(m, "_optim_AdamW", "torch.optim.AdamW's update (docs/optim.md).");
  adamw.def(py::init([adam_fill](const py::list& groups) {
              auto adam_groups = groups_arg<optim::AdamOptions>(groups, "AdamW", adam_fill);
              std::vector<optim::ParamGroup<optim::AdamWOptions>> out;
              for (auto& g : adam_groups)
                out.push_back({std::move(g.params), {g.options.lr, g.options.betas, g.options.eps, g.options.weight_decay}});
              return std::make_unique<optim::AdamW>(std::move(out));
            }),
            "groups"_a);

  py::class_<optim::Adadelta, Optimizer> adadelta(m, "_optim_Adadelta", "torch.optim.Adadelta's update (docs/optim.md).");
  adadelta.def(py::init([](const py::list& groups) {
                 return std::make_unique<optim::Adadelta>(groups_arg<optim::AdadeltaOptions>(
                     groups, "Adadelta", [](optim::AdadeltaOptions& o, const py::dict& d) {
                       o = {option(d, "lr"), option(d, "rho"), option(d, "eps"), option(d, "weight_decay")};
                     }));
               }),
               "groups"_a)
      .def("options", [](const optim::Adadelta& self, std::size_t g) {
        const auto o = self.options(g);
        return py::dict("lr"_a = o.lr, "rho"_a = o.rho, "eps"_a = o.eps, "weight_decay"_a = o.weight_decay);
      }, "group"_a);
  py::class_<optim::RMSprop, Optimizer> rmsprop(m, "_optim_RMSprop", "torch.optim.RMSprop's update (docs/optim.md).");
  rmsprop.def(py::init([](const py::list& groups) {
                return std::make_unique<optim::RMSprop>(groups_arg<optim::RMSpropOptions>(
                    groups, "RMSprop", [](optim::RMSpropOptions& o, const py::dict& d) {
                      o = {option(d, "lr"), option(d, "alpha"), option(d, "eps"), option(d, "weight_decay"),
                           option(d, "momentum"), d["centered"].cast<bool>()};
                    }));
              }),
              "groups"_a)
      .def("options", [](const optim::RMSprop& self, std::size_t g) {
        const auto o = self.options(g);
        return py::dict("lr"_a = o.lr, "alpha"_a = o.alpha, "eps"_a = o.eps, "weight_decay"_a = o.weight_decay,
                        "momentum"_a = o.momentum, "centered"_a = o.centered);
      }, "group"_a);

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
