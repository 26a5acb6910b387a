// safetensors from Python: load (mapped by default), read metadata, save atomically.
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "bindings.hpp"
#include "convert.hpp"
#include "kael/io/safetensors.hpp"

namespace py = pybind11;

namespace kael::python {

void init_io(py::module_& m) {
  m.def(
      "load_safetensors",
      [](const std::filesystem::path& path, bool mmap) {
        io::LoadOptions options;
        options.mmap = mmap;
        io::SafetensorsFile file;
        {
          py::gil_scoped_release release;
          file = io::read_safetensors(path, options);
        }
        py::dict out;
        for (auto& [name, tensor] : file.tensors) out[py::str(name)] = py::cast(std::move(tensor));
        return out;
      },
      "path"_a, "mmap"_a = true,
      R"doc(Validates a safetensors file and returns {name: kael.Tensor}.
With mmap=True aligned tensors point into a private copy-on-write mapping of the file
(writes never reach it); the mapping lives as long as any tensor or numpy view uses it.)doc");

  m.def(
      "read_safetensors_metadata",
      [](const std::filesystem::path& path) {
        py::gil_scoped_release release;
        return io::read_safetensors_header(path).metadata;
      },
      "path"_a, "The __metadata__ map of a safetensors file ({} when it has none).");

  m.def(
      "save_safetensors",
      [](const std::filesystem::path& path, const py::dict& tensors,
         std::optional<std::map<std::string, std::string>> metadata) {
        std::map<std::string, Tensor> converted;
        for (auto [key, value] : tensors) {
          if (!py::isinstance<py::str>(key)) throw kael::TypeError("tensor names must be str");
          converted.emplace(key.cast<std::string>(), tensor_from_object(value));
        }
        py::gil_scoped_release release;
        io::save_safetensors(path, converted, metadata.value_or(std::map<std::string, std::string>{}));
      },
      "path"_a, "tensors"_a, "metadata"_a = py::none(),
      "Writes {name: numpy array or kael.Tensor} atomically (temporary file, fsync, rename).");
}

}  // namespace kael::python
