// The native half of the book-style kael.GPT (python/kael/book.py): GPT-2 weights without a
// tokenizer, whose forward pass returns the logits of every position of a (B, T) batch, with
// or without a KV cache that later calls continue. Long calls release the GIL.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <memory>
#include <vector>

#include "bindings.hpp"
#include "convert.hpp"
#include "kael/io/safetensors.hpp"
#include "kael/kael.hpp"

namespace py = pybind11;

namespace kael::python {
namespace {

using IdBatch = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>;

// ids (B, T) as int32 rows, checked for shape; the model checks the values.
std::vector<std::vector<std::int32_t>> batch_rows(const IdBatch& ids) {
  if (ids.ndim() != 2 || ids.shape(0) == 0 || ids.shape(1) == 0)
    throw ValueError("ids must have shape (B, T) with B, T >= 1");
  const auto B = ids.shape(0), T = ids.shape(1);
  std::vector<std::vector<std::int32_t>> rows(static_cast<std::size_t>(B));
  const auto view = ids.unchecked<2>();
  for (py::ssize_t b = 0; b < B; ++b) {
    rows[static_cast<std::size_t>(b)].resize(static_cast<std::size_t>(T));
    for (py::ssize_t t = 0; t < T; ++t) {
      const std::int64_t id = view(b, t);
      if (id < 0 || id > INT32_MAX) throw IndexError(str("token id ", id, " at (", b, ", ", t, ") is not a token id"));
      rows[static_cast<std::size_t>(b)][static_cast<std::size_t>(t)] = static_cast<std::int32_t>(id);
    }
  }
  return rows;
}

// The logits (B, T, V) of each row fed to its session, in one pass a row.
py::array_t<float> feed_rows(const model::GPT2& gpt2, std::vector<model::Session>& sessions,
                             const std::vector<std::vector<std::int32_t>>& rows) {
  if (rows.size() != sessions.size())
    throw ValueError(str("the KV cache holds ", sessions.size(), " sequences but ids has ", rows.size(),
                         " rows (call reset_kv_cache() to start another batch)"));
  const auto T = static_cast<py::ssize_t>(rows[0].size()), V = static_cast<py::ssize_t>(gpt2.config().vocab_size);
  py::array_t<float> out({static_cast<py::ssize_t>(rows.size()), T, V});  // (B, T, V)
  float* dst = out.mutable_data();
  py::gil_scoped_release release;
  for (std::size_t b = 0; b < rows.size(); ++b)
    gpt2.forward_all_logits(sessions[b], rows[b], {dst + b * T * V, static_cast<std::size_t>(T * V)});
  return out;
}

struct BookModel {
  std::shared_ptr<const model::GPT2> gpt2;
};

// One KV cache per row of the batch it was made for.
struct BookCache {
  std::shared_ptr<const model::GPT2> gpt2;
  std::vector<model::Session> sessions;
  // Move-only, as sessions are (a vector of them claims to be copyable, so pybind11 would try).
  BookCache(std::shared_ptr<const model::GPT2> model, int batch) : gpt2(std::move(model)) {
    for (int i = 0; i < batch; ++i) sessions.push_back(gpt2->new_session());
  }
  BookCache(BookCache&&) = default;
  BookCache(const BookCache&) = delete;
};

// DIR/model.safetensors with DIR/config.json, or any .safetensors file with the config.json beside it.
BookModel load(const std::filesystem::path& path, const std::string& dtype) {
  const model::WeightDType weights = model::parse_weight_dtype(dtype);
  py::gil_scoped_release release;
  if (path.extension() != ".safetensors" || path.filename() == "model.safetensors") {
    model::LoadOptions options;
    options.dtype = weights;
    const auto dir = path.extension() == ".safetensors" ? path.parent_path() : path;
    return {std::make_shared<const model::GPT2>(model::GPT2::load(dir.empty() ? "." : dir, options))};
  }
  const auto config = model::Config::from_directory(path.parent_path().empty() ? "." : path.parent_path());
  auto file = io::read_safetensors(path, io::LoadMode::Mapped);
  return {std::make_shared<const model::GPT2>(
      model::GPT2::from_tensors(config, std::move(file.tensors), str("'", path.string(), "'"), weights))};
}

}  // namespace

void init_book(py::module_& m) {
  m.def("require_device", &kael::require_device, "device"_a,
        "Raises kael.Error unless this build runs on `device` (only 'cpu').");

  py::class_<BookCache>(m, "BookKVCache", "KV caches for the rows of one batch (kael.GPT(use_cache=True)).")
      .def("feed", [](BookCache& c, const IdBatch& ids) { return feed_rows(*c.gpt2, c.sessions, batch_rows(ids)); },
           "ids"_a,
           "Appends ids (B, T) to the caches; the logits (B, T, vocab) of the new positions.")
      .def_property_readonly("length", [](const BookCache& c) { return c.sessions[0].length(); },
                             "Positions in each cache.");

  py::class_<BookModel>(m, "BookModel", "GPT-2 weights without a tokenizer; backs kael.GPT.")
      .def_static("load", &load, "path"_a, "dtype"_a = "f32",
                  "Loads a checkpoint directory, or a .safetensors file with config.json beside it.")
      .def_property_readonly("config", [](const BookModel& b) { return config_dict(b.gpt2->config()); })
      .def(
          "logits",
          [](const BookModel& b, const IdBatch& ids) {
            const auto rows = batch_rows(ids);
            std::vector<model::Session> sessions;
            for (std::size_t i = 0; i < rows.size(); ++i) sessions.push_back(b.gpt2->new_session());
            return feed_rows(*b.gpt2, sessions, rows);
          },
          "ids"_a, "The logits (B, T, vocab) at every position of ids (B, T), one forward pass per row.")
      .def(
          "new_cache",
          [](const BookModel& b, int batch) {
            if (batch < 1) throw ValueError(str("a KV cache needs a batch of at least 1, got ", batch));
            return BookCache(b.gpt2, batch);
          },
          "batch"_a, "Empty KV caches for `batch` sequences.");
}

}  // namespace kael::python
