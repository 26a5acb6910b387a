// kael.finetune and kael.train from Python: the library's training run (kael/train/run.hpp) with
// the command line's options as keyword arguments. The GIL is released while the run works and
// taken back for the callback, which gets each record as a dict (the --log-json object) and can
// return False to stop the run (a checkpoint is saved first). An exception in the callback, or a
// KeyboardInterrupt, also stops the run after saving, then propagates. Under mpirun every rank
// runs the same call and returns the same history; the callback runs on rank 0 only.
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <optional>

#include "bindings.hpp"
#include "convert.hpp"
#include "kael/core/error.hpp"
#include "kael/model/gpt2.hpp"
#include "kael/train/run.hpp"
#include "kael/train/world.hpp"

namespace py = pybind11;

namespace kael::python {

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> data_paths(const py::object& data) {
  if (py::isinstance<py::str>(data) || py::hasattr(data, "__fspath__")) return {data.cast<fs::path>()};
  std::vector<fs::path> paths;
  for (const auto item : data) paths.push_back(item.cast<fs::path>());
  return paths;
}

// The keyword arguments, under the command line's option names with '_' for '-', over the
// defaults of train::RunOptions. TypeError for a name that is not an option.
train::RunOptions run_options(const py::kwargs& kwargs) {
  train::RunOptions o;
  for (const auto& [key, value] : kwargs) {
    const std::string name = key.cast<std::string>();
    if (name == "steps") o.steps = int64_arg(value, "steps");
    else if (name == "epochs") o.epochs = value.cast<double>();
    else if (name == "batch") o.batch = int_arg(value, "batch");
    else if (name == "seq") o.seq = int_arg(value, "seq");
    else if (name == "accum") o.accum = int_arg(value, "accum");
    else if (name == "lr") o.schedule.lr = value.cast<double>();
    else if (name == "schedule") o.schedule.kind = train::parse_schedule(value.cast<std::string>());
    else if (name == "warmup") o.schedule.warmup = int64_arg(value, "warmup");
    else if (name == "min_lr") o.schedule.min_lr = value.cast<double>();
    else if (name == "weight_decay") o.adamw.weight_decay = value.cast<double>();
    else if (name == "beta1") o.adamw.beta1 = value.cast<double>();
    else if (name == "beta2") o.adamw.beta2 = value.cast<double>();
    else if (name == "eps") o.adamw.eps = value.cast<double>();
    else if (name == "grad_clip") o.grad_clip = value.cast<double>();
    else if (name == "dropout") o.dropout = value.cast<float>();
    else if (name == "seed") o.seed = seed_arg(value, "seed");
    else if (name == "order") o.order = train::parse_order(value.cast<std::string>());
    else if (name == "precision") o.precision = train::parse_precision(value.cast<std::string>());
    else if (name == "val_fraction") o.val_fraction = value.cast<double>();
    else if (name == "eval_every") o.eval_every = int64_arg(value, "eval_every");
    else if (name == "save_every") o.save_every = int64_arg(value, "save_every");
    else if (name == "resume") o.resume = value.cast<bool>();
    else if (name == "overwrite") o.overwrite = value.cast<bool>();
    else if (name == "threads") o.threads = int_arg(value, "threads");
    else if (name == "log_json") o.log_json = value.is_none() ? fs::path() : value.cast<fs::path>();
    else throw kael::TypeError(str("unexpected keyword argument '", name, "'"));
  }
  return o;
}

py::object record_dict(const train::Record& record) {
  return py::module_::import("json").attr("loads")(train::record_json(record));
}

// Runs `body` (a call of train::finetune or train::train) without the GIL; see the file comment.
py::list run_with_callback(const py::object& callback,
                           const std::function<train::RunResult(const train::RunCallbacks&)>& body) {
  std::optional<py::error_already_set> raised;  // from the callback or a signal, re-raised at the end
  bool stop = false;
  train::RunCallbacks callbacks;
  callbacks.on_record = [&](const train::Record& record) {
    if (callback.is_none() || raised) return;
    py::gil_scoped_acquire gil;
    try {
      const py::object answer = callback(record_dict(record));
      if (answer.ptr() == Py_False) stop = true;
    } catch (py::error_already_set& e) {
      raised.emplace(std::move(e));
    }
  };
  callbacks.stop_requested = [&] {
    py::gil_scoped_acquire gil;
    if (!raised && PyErr_CheckSignals() != 0) raised.emplace();
    return stop || raised.has_value();
  };
  train::RunResult result;
  {
    py::gil_scoped_release release;
    result = body(callbacks);
  }
  if (raised) throw std::move(*raised);
  py::list history;
  for (const auto& record : result.history) history.append(record_dict(record));
  return history;
}

model::Config config_from(const py::object& config) {
  if (py::isinstance<py::dict>(config))
    return model::Config::from_json(py::module_::import("json").attr("dumps")(config).cast<std::string>(), "config");
  return model::Config::from_json_file(config.cast<fs::path>());
}

}  // namespace

void init_finetune(py::module_& m) {
  m.def(
      "world",
      [] {
        const train::WorldInfo world = train::world();
        py::dict info;
        info["rank"] = world.rank;
        info["size"] = world.size;
        info["local_size"] = world.local_size;
        info["mpi"] = world.mpi;
        return info;
      },
      "This process's place in a data-parallel run: {'rank', 'size', 'local_size', 'mpi'}; rank 0 of 1 unless "
      "started by mpirun.");
  m.def(
      "finetune",
      [](const fs::path& model_dir, const py::object& data, const fs::path& out_dir, const py::object& callback,
         const py::kwargs& kwargs) {
        const auto options = run_options(kwargs);
        const auto paths = data_paths(data);
        return run_with_callback(callback, [&](const train::RunCallbacks& callbacks) {
          return train::finetune(model_dir, paths, out_dir, options, callbacks);
        });
      },
      "model_dir"_a, "data"_a, "out_dir"_a, py::kw_only(), "callback"_a = py::none(),
      "Fine-tunes the model in model_dir on data (a path or a list of paths) into out_dir; see kael.finetune.");
  m.def(
      "train",
      [](const py::object& config, const py::object& data, const fs::path& out_dir, const fs::path& tokenizer,
         const py::object& callback, const py::kwargs& kwargs) {
        const auto options = run_options(kwargs);
        const auto paths = data_paths(data);
        const auto parsed = config_from(config);
        return run_with_callback(callback, [&](const train::RunCallbacks& callbacks) {
          return train::train(parsed, tokenizer, paths, out_dir, options, callbacks);
        });
      },
      "config"_a, "data"_a, "out_dir"_a, py::kw_only(), "tokenizer"_a = fs::path("data/gpt2"),
      "callback"_a = py::none(), "Trains a fresh GPT-2 of config (a dict or a config.json path); see kael.train.");
}

}  // namespace kael::python
