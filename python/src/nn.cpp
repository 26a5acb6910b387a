// kael.nn's native half: the C++ layers and the book's GPT (kael::nn) as objects that
// python/kael/nn/modules.py wraps in its Module, plus the rule load_state_dict follows. Long
// calls (a GPT forward, generate) release the GIL.
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "bindings.hpp"
#include "convert.hpp"
#include "kael/nn/generate.hpp"
#include "kael/nn/gpt.hpp"
#include "kael/nn/gpt2_weights.hpp"
#include "kael/nn/layers.hpp"
#include "kael/kael.hpp"

namespace py = pybind11;

namespace kael::python {

namespace {

using NamedList = std::vector<std::pair<std::string, Tensor>>;

NamedList as_pairs(const std::vector<nn::NamedTensor>& named) {
  NamedList out;
  for (const auto& [name, tensor] : named) out.emplace_back(name, tensor);
  return out;
}


nn::StateDict state_from(const py::dict& state) {
  nn::StateDict out;
  for (const auto& [key, value] : state) out.emplace(key.cast<std::string>(), tensor_arg(value, "load_state_dict"));
  return out;
}

}  // namespace

void init_nn(py::module_& m) {
  m.def(
      "_load_named_tensors",
      [](const NamedList& targets, const py::dict& state) {
        std::vector<nn::NamedTensor> named;
        for (const auto& [name, tensor] : targets) named.push_back({name, tensor});
        nn::load_named_tensors(named, state_from(state));
      },
      "targets"_a, "state"_a);

  py::class_<nn::Module, std::shared_ptr<nn::Module>>(m, "_NativeModule", "A kael::nn module (wrapped by kael.nn.Module).")
      .def("named_parameters", [](const nn::Module& module) { return as_pairs(module.named_parameters()); })
      .def("named_buffers", [](const nn::Module& module) { return as_pairs(module.named_buffers()); })
      .def("state_dict", &nn::Module::state_dict)
      .def("forward", [](nn::Module& module, const Tensor& x) { return module.forward(x); }, "input"_a)
      .def("train", &nn::Module::train, "mode"_a = true)
      .def_property_readonly("training", &nn::Module::is_training)
      .def_property_readonly("type_name", &nn::Module::name);

  py::class_<nn::Linear, nn::Module, std::shared_ptr<nn::Linear>>(m, "_Linear")
      .def(py::init<std::int64_t, std::int64_t, bool>(), "in_features"_a, "out_features"_a, "bias"_a = true)
      .def_property_readonly("weight", [](const nn::Linear& l) { return l.weight; })
      .def_property_readonly("bias", [](const nn::Linear& l) { return tensor_or_none(l.bias); });
  py::class_<nn::Embedding, nn::Module, std::shared_ptr<nn::Embedding>>(m, "_Embedding")
      .def(py::init<std::int64_t, std::int64_t>(), "num_embeddings"_a, "embedding_dim"_a)
      .def_property_readonly("weight", [](const nn::Embedding& e) { return e.weight; });
  py::class_<nn::LayerNorm, nn::Module, std::shared_ptr<nn::LayerNorm>>(m, "_LayerNorm")
      .def(py::init([](const py::object& shape, double eps, bool affine) {
             return std::make_shared<nn::LayerNorm>(shape_arg(shape, "LayerNorm"), eps, affine);
           }),
           "normalized_shape"_a, "eps"_a = 1e-5, "elementwise_affine"_a = true)
      .def_property_readonly("weight", [](const nn::LayerNorm& l) { return tensor_or_none(l.weight); })
      .def_property_readonly("bias", [](const nn::LayerNorm& l) { return tensor_or_none(l.bias); })
      .def_property_readonly("eps", [](const nn::LayerNorm& l) { return l.eps; });
  py::class_<nn::Dropout, nn::Module, std::shared_ptr<nn::Dropout>>(m, "_Dropout")
      .def(py::init<double>(), "p"_a = 0.5)
      .def_property_readonly("p", [](const nn::Dropout& d) { return d.p; });
  py::class_<nn::GELU, nn::Module, std::shared_ptr<nn::GELU>>(m, "_GELU")
      .def(py::init<std::string>(), "approximate"_a = "none")
      .def_property_readonly("approximate", [](const nn::GELU& g) { return g.approximate; });

  py::class_<nn::GptConfig>(m, "GptConfig", "The sizes of the book's GPT (GPT-2 small by default).")
      .def(py::init([](std::int64_t vocab_size, std::int64_t n_positions, std::int64_t n_layer, std::int64_t n_head,
                       std::int64_t n_embd, double dropout, bool tanh_gelu, bool bias, bool tied_embeddings,
                       double layer_norm_eps) {
             return nn::GptConfig{vocab_size, n_positions, n_layer, n_head, n_embd, dropout, tanh_gelu, bias,
                                  tied_embeddings, layer_norm_eps};
           }),
           py::kw_only(), "vocab_size"_a = 50257, "n_positions"_a = 1024, "n_layer"_a = 12, "n_head"_a = 12,
           "n_embd"_a = 768, "dropout"_a = 0.0, "tanh_gelu"_a = true, "bias"_a = true, "tied_embeddings"_a = true,
           "layer_norm_eps"_a = 1e-5)
      .def_readwrite("vocab_size", &nn::GptConfig::vocab_size)
      .def_readwrite("n_positions", &nn::GptConfig::n_positions)
      .def_readwrite("n_layer", &nn::GptConfig::n_layer)
      .def_readwrite("n_head", &nn::GptConfig::n_head)
      .def_readwrite("n_embd", &nn::GptConfig::n_embd)
      .def_readwrite("dropout", &nn::GptConfig::dropout)
      .def_readwrite("tanh_gelu", &nn::GptConfig::tanh_gelu)
      .def_readwrite("bias", &nn::GptConfig::bias)
      .def_readwrite("tied_embeddings", &nn::GptConfig::tied_embeddings)
      .def_readwrite("layer_norm_eps", &nn::GptConfig::layer_norm_eps)
      .def_static("gpt2_small", &nn::GptConfig::gpt2_small)
      .def_static("gpt2_medium", &nn::GptConfig::gpt2_medium)
      .def_static("gpt2_large", &nn::GptConfig::gpt2_large)
      .def_static("gpt2_xl", &nn::GptConfig::gpt2_xl)
      .def("validate", &nn::GptConfig::validate)
      .def("__repr__", [](const nn::GptConfig& c) {
        return str("GptConfig(vocab_size=", c.vocab_size, ", n_positions=", c.n_positions, ", n_layer=", c.n_layer,
                   ", n_head=", c.n_head, ", n_embd=", c.n_embd, ", dropout=", c.dropout,
                   ", tanh_gelu=", c.tanh_gelu ? "True" : "False", ", bias=", c.bias ? "True" : "False",
                   ", tied_embeddings=", c.tied_embeddings ? "True" : "False", ", layer_norm_eps=", c.layer_norm_eps, ")");
      });

  py::class_<nn::KVCache>(m, "KVCache", "The keys and values of the positions a GPT has seen, one pair per block.")
      .def(py::init<>())
      .def_property_readonly("length", &nn::KVCache::length)
      .def("clear", &nn::KVCache::clear);

  py::class_<nn::GPT, nn::Module, std::shared_ptr<nn::GPT>>(m, "_GPT")
      .def(py::init<const nn::GptConfig&>(), "config"_a = nn::GptConfig::gpt2_small())
      .def_property_readonly("config", &nn::GPT::config)
      .def(
          "forward",
          [](nn::GPT& model, const Tensor& ids, nn::KVCache* cache) {
            py::gil_scoped_release release;
            return model.forward(ids, cache);
          },
          "ids"_a, "cache"_a = nullptr, "ids (B, T) -> logits (B, T, vocab); a cache continues the sequences it holds.");

  m.def(
      "load_gpt2_weights",
      [](nn::GPT& model, const std::filesystem::path& path) {
        py::gil_scoped_release release;
        nn::load_gpt2_weights(model, path);
      },
      "model"_a, "path"_a);
  m.def("require_device", &kael::require_device, "device"_a,
        "Raises kael.Error unless this build runs on `device` (only 'cpu').");
  m.def("translated_gpt2_name", &nn::translated_gpt2_name, "name"_a);
  m.def("stored_transposed", &nn::stored_transposed, "name"_a);
  m.def("gpt2_name", &nn::gpt2_name, "name"_a, "The GPT-2 (GPT2LMHeadModel) name of a kael parameter name.");
  m.def(
      "save_gpt2_weights",
      [](const nn::GPT& model, const std::filesystem::path& path) {
        py::gil_scoped_release release;
        nn::save_gpt2_weights(model, path);
      },
      "model"_a, "path"_a,
      "Writes the model's parameters under GPT-2's names and Conv1D layout, as transformers loads them.");
  m.def(
      "_generate",
      [](nn::GPT& model, const Tensor& prompt, std::int64_t max_new_tokens, double temperature, std::int64_t top_k) {
        py::gil_scoped_release release;
        return nn::generate(model, prompt, {.max_new_tokens = max_new_tokens, .temperature = temperature, .top_k = top_k});
      },
      "model"_a, "prompt"_a, "max_new_tokens"_a = 60, "temperature"_a = 1.0, "top_k"_a = 0);
}

}  // namespace kael::python
