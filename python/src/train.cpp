// kael._kael.TrainModel and kael._kael.AdamW: the training layer's model and optimizer, for
// the gradient and optimizer comparisons against PyTorch and for the Python training API.
// Parameters, gradients and moments are numpy views into kael's memory (writable; they keep
// their owner alive). Every long call releases the GIL.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>


#include "bindings.hpp"
#include "convert.hpp"
#include "kael/core/error.hpp"
#include "kael/train/adamw.hpp"
#include "kael/train/gpt2_train.hpp"

namespace py = pybind11;

namespace kael::python {
namespace {

using train::AdamW;
using train::TrainableGPT2;

using IdArray = py::array_t<std::int32_t, py::array::c_style | py::array::forcecast>;

// (B, T) of an id array, which must be 2-D; targets must have the inputs' shape.
std::pair<int, int> batch_shape(const IdArray& inputs, const IdArray& targets) {
  if (inputs.ndim() != 2) throw kael::ValueError(str("inputs must have shape (B, T), not ", inputs.ndim(), "-D"));
  if (targets.ndim() != 2 || targets.shape(0) != inputs.shape(0) || targets.shape(1) != inputs.shape(1))
    throw kael::ValueError("targets must have the shape of inputs (B, T)");
  return {static_cast<int>(inputs.shape(0)), static_cast<int>(inputs.shape(1))};
}

py::array_t<float> view(float* data, const Shape& shape, const py::object& owner) {
  std::vector<py::ssize_t> dims(shape.begin(), shape.end()), strides(shape.size());
  py::ssize_t stride = sizeof(float);
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= dims[i];
  }
  return py::array_t<float>(dims, strides, data, owner);
}

// threads (None: leave kael's setting) for every later call, as Model.from_pretrained takes it.
void apply_threads(std::optional<int> threads) {
  if (!threads) return;
  if (*threads < 1) throw kael::ValueError(str("threads must be at least 1, got ", *threads));
  model::set_num_threads(*threads);
}

const train::Parameter& find_parameter(const TrainableGPT2& model, const std::string& name) {
  for (const train::Parameter& p : model.parameters())
    if (p.name == name) return p;
  throw kael::IndexError(str("no parameter named '", name, "'"));
}

}  // namespace

void init_train(py::module_& m) {
  py::class_<TrainableGPT2>(m, "TrainModel", "A trainable GPT-2 (F32 master weights in Hugging Face's layout).")
      .def_static(
          "load",
          [](const std::filesystem::path& dir, std::optional<int> threads) {
            apply_threads(threads);
            py::gil_scoped_release release;
            return TrainableGPT2::load(dir);
          },
          "model_dir"_a, "threads"_a = py::none(), "Loads DIR/model.safetensors (+ config.json) as F32.")
      .def_static(
          "init",
          [](const std::string& config_json, std::uint64_t seed, std::optional<int> threads) {
            apply_threads(threads);
            const model::Config config = model::Config::from_json(config_json);
            py::gil_scoped_release release;
            return TrainableGPT2::init(config, seed);
          },
          "config_json"_a, "seed"_a = 0, "threads"_a = py::none(), "A fresh GPT-2 from config.json text, initialized as transformers does.")
      .def(
          "forward_backward",
          [](TrainableGPT2& self, const IdArray& inputs, const IdArray& targets, float loss_scale) {
            const auto [B, T] = batch_shape(inputs, targets);
            py::gil_scoped_release release;
            return self.forward_backward(inputs.data(), targets.data(), B, T, loss_scale);
          },
          "inputs"_a, "targets"_a, "loss_scale"_a = 1.0f,
          "Adds loss_scale * d(mean loss)/d(parameter) to the grads; returns the mean loss. -1 targets are skipped.")
      .def(
          "evaluate",
          [](TrainableGPT2& self, const IdArray& inputs, const IdArray& targets) {
            const auto [B, T] = batch_shape(inputs, targets);
            py::gil_scoped_release release;
            return self.evaluate(inputs.data(), targets.data(), B, T);
          },
          "inputs"_a, "targets"_a, "The mean loss, without dropout or gradients.")
      .def("zero_grad", [](TrainableGPT2& self) {
        py::gil_scoped_release release;
        self.zero_grad();
      })
      .def("grad_norm", [](const TrainableGPT2& self) { return self.grad_norm(); })
      .def("clip_grad_norm", [](TrainableGPT2& self, double max_norm) { return self.clip_grad_norm(max_norm); },
           "max_norm"_a, "torch.nn.utils.clip_grad_norm_; returns the norm before clipping.")
      .def(
          "set_dropout",
          [](TrainableGPT2& self, float probability, std::uint64_t seed) { self.set_dropout({probability, seed}); },
          "probability"_a, "seed"_a = 0)
      .def_property(
          "precision", [](const TrainableGPT2& self) { return std::string(train::precision_name(self.precision())); },
          [](TrainableGPT2& self, const std::string& name) { self.set_precision(train::parse_precision(name)); },
          "\"f32\" or \"bf16\" (the matrix products with BF16 operands and F32 sums, as torch's CPU autocast).")
      .def_property("dropout_counter", &TrainableGPT2::dropout_counter, &TrainableGPT2::set_dropout_counter)
      .def_property_readonly("parameter_count", &TrainableGPT2::parameter_count)
      .def_property_readonly("names",
                             [](const TrainableGPT2& self) {
                               std::vector<std::string> names;
                               for (const auto& p : self.parameters()) names.push_back(p.name);
                               return names;
                             })
      .def(
          "parameter",
          [](py::object self, const std::string& name) {
            const auto& p = find_parameter(self.cast<const TrainableGPT2&>(), name);
            return view(p.data, p.shape, self);
          },
          "name"_a, "The parameter's values as a writable numpy view.")
      .def(
          "grad",
          [](py::object self, const std::string& name) {
            const auto& p = find_parameter(self.cast<const TrainableGPT2&>(), name);
            return view(p.grad, p.shape, self);
          },
          "name"_a, "The parameter's gradient as a writable numpy view.");

  py::class_<AdamW>(m, "AdamW", "torch.optim.AdamW's update over a TrainModel's parameters.")
      .def(py::init([](const TrainableGPT2& model, double beta1, double beta2, double eps, double weight_decay) {
             return AdamW(model.parameters(), {beta1, beta2, eps, weight_decay});
           }),
           "model"_a, "beta1"_a = 0.9, "beta2"_a = 0.999, "eps"_a = 1e-8, "weight_decay"_a = 0.01)
      .def(
          "step",
          [](AdamW& self, TrainableGPT2& model, double lr) {
            py::gil_scoped_release release;
            self.step(model.parameters(), lr);
          },
          "model"_a, "lr"_a)
      .def_property("step_count", &AdamW::step_count, &AdamW::set_step_count)
      .def(
          "moments",
          [](py::object self, std::size_t i) {
            const train::Moments mo = self.cast<AdamW&>().moments(i);
            const Shape shape{static_cast<std::int64_t>(mo.m.size())};
            return py::make_tuple(view(mo.m.data(), shape, self), view(mo.v.data(), shape, self));
          },
          "index"_a, "(m, v) of parameter i (TrainModel.names order), flat writable numpy views.");
}

}  // namespace kael::python
