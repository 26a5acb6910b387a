// The GPT-2 tokenizer from Python (ids equal tiktoken's gpt2 encoding).
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "bindings.hpp"
#include "convert.hpp"
#include "kael/text/tokenizer.hpp"

namespace py = pybind11;

namespace kael::python {

namespace {
// tiktoken's allowed_special: "all", or a collection of special-token strings.
bool allows_endoftext(const py::object& allowed_special) {
  if (py::isinstance<py::str>(allowed_special)) {
    const auto value = utf8_arg(allowed_special, "allowed_special");
    return value == "all" || value == "<|endoftext|>";
  }
  for (auto item : allowed_special)
    if (py::isinstance<py::str>(item) && utf8_arg(item, "allowed_special") == "<|endoftext|>") return true;
  return false;
}

std::string text_bytes(const py::object& text) {
  if (py::isinstance<py::bytes>(text)) return text.cast<std::string>();
  if (py::isinstance<py::str>(text)) return utf8_arg(text, "text");
  throw kael::TypeError("text must be str or bytes");
}
}  // namespace

py::str utf8_piece(const std::string& bytes) {
  return py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), "replace"));
}

void init_text(py::module_& m) {
  py::class_<text::StreamDecoder>(m, "IncrementalDecoder",
                                  "Turns ids into text pieces that never end in half a UTF-8 character.")
      .def("push", [](text::StreamDecoder& d, std::int32_t id) { return utf8_piece(d.push(id)); }, "id"_a,
           "Adds one id; returns the text completed so far (possibly empty).")
      .def("flush", [](text::StreamDecoder& d) { return utf8_piece(d.flush()); },
           "Returns what is held back (invalid bytes become U+FFFD).");

  py::class_<text::Tokenizer, std::shared_ptr<text::Tokenizer>>(m, "BpeTokenizer", "GPT-2's byte-level BPE; ids equal tiktoken's gpt2 encoding.")
      .def(py::init([](const std::filesystem::path& vocab, const std::filesystem::path& merges) {
             return text::Tokenizer::from_files(vocab, merges);
           }),
           "vocab_path"_a, "merges_path"_a)
      .def(
          "encode",
          [](const text::Tokenizer& t, const py::object& text, const py::object& allowed_special) {
            const std::string bytes = text_bytes(text);
            const bool special = allows_endoftext(allowed_special);
            py::gil_scoped_release release;
            return t.encode(bytes, special);
          },
          "text"_a, "allowed_special"_a = py::tuple(),
          "Ids of `text`. '<|endoftext|>' is ordinary text unless allowed_special is 'all' or contains it.")
      .def(
          "decode",
          [](const text::Tokenizer& t, const std::vector<std::int32_t>& ids) { return py::bytes(t.decode(ids)); },
          "ids"_a, "The concatenated bytes of the tokens (not necessarily valid UTF-8).")
      .def_property_readonly("vocabulary_size", &text::Tokenizer::vocabulary_size)
      .def(
          "incremental_decoder", [](const text::Tokenizer& t) { return text::StreamDecoder(t); },
          py::keep_alive<0, 1>(), "A new IncrementalDecoder over this tokenizer.");
}

}  // namespace kael::python
