// kael.Model from Python: load a GPT-2 checkpoint directory, get next-token logits, generate
// text whole or streamed. Every long call releases the GIL.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <map>
#include <memory>

#include "bindings.hpp"
#include "convert.hpp"
#include "kael/generate/beam_search.hpp"
#include "kael/generate/generator.hpp"
#include "kael/io/checksums.hpp"
#include "kael/model/gpt2.hpp"
#include "kael/text/tokenizer.hpp"

namespace py = pybind11;

namespace kael::python {

namespace {

// The model and its tokenizer, shared with every stream that outlives a call.
struct Model {
  std::shared_ptr<const model::GPT2> gpt2;
  std::shared_ptr<text::Tokenizer> tokenizer;
};

std::vector<std::int32_t> prompt_ids(const Model& m, const py::object& prompt) {
  if (py::isinstance<py::str>(prompt) || py::isinstance<py::bytes>(prompt)) {
    const std::string text = py::isinstance<py::str>(prompt) ? utf8_arg(prompt, "prompt") : prompt.cast<std::string>();
    if (text.empty()) throw kael::ValueError("the prompt is empty");
    return m.tokenizer->encode(text);
  }
  auto ids = prompt.cast<std::vector<std::int32_t>>();
  if (ids.empty()) throw kael::ValueError("the prompt has no token ids");
  return ids;
}

// The model that ships inside the package: kael/models/NAME (installed by python/CMakeLists.txt).
std::filesystem::path bundled_model_dir() {
  const std::filesystem::path init = py::module_::import("kael").attr("__file__").cast<std::string>();
  const auto dir = init.parent_path() / "models" / KAEL_BUNDLED_MODEL_NAME;
  if (!std::filesystem::is_directory(dir))
    throw kael::Error(str("the bundled model is missing from this installation: no directory '", dir.string(), "'"));
  return dir;
}

// Keyword arguments shared by generate() and stream(), with the CLI's defaults.
generate::GenerateOptions make_options(int max_tokens, float temperature, int top_k, float top_p, float min_p,
                                       float repetition_penalty, float presence_penalty, float frequency_penalty,
                                       std::uint64_t seed, std::vector<std::string> stop, bool ignore_eos,
                                       bool truncate, int no_repeat_ngram_size,
                                       const std::map<std::int32_t, float>& logit_bias) {
  generate::GenerateOptions options;
  options.sampling.no_repeat_ngram_size = no_repeat_ngram_size;
  options.sampling.logit_bias = logit_bias;
  options.max_new_tokens = max_tokens;
  options.sampling.temperature = temperature;
  options.sampling.top_k = top_k;
  options.sampling.top_p = top_p;
  options.sampling.min_p = min_p;
  options.sampling.repetition_penalty = repetition_penalty;
  options.sampling.presence_penalty = presence_penalty;
  options.sampling.frequency_penalty = frequency_penalty;
  options.sampling.seed = seed;
  options.stop = std::move(stop);
  options.ignore_eos = ignore_eos;
  options.truncate_prompt = truncate;
  return options;
}

// A generation in progress; each next() runs model steps (GIL released) until a piece of
// text is ready, so pieces never split a UTF-8 character or show part of a stop string.
class Stream {
 public:
  Stream(Model model, std::vector<std::int32_t> ids, const generate::GenerateOptions& options)
      : model_(std::move(model)),
        sequence_(*model_.tokenizer, ids, options, model_.gpt2->config().n_positions),
        session_(model_.gpt2->new_session()) {}

  py::object next() {
    std::string piece;
    {
      py::gil_scoped_release release;
      while (piece.empty() && !sequence_.finished()) {
        auto logits = model_.gpt2->forward(session_, sequence_.pending());
        piece = sequence_.accept(logits).text;
      }
    }
    if (piece.empty()) throw py::stop_iteration();
    return utf8_piece(piece);
  }

  const generate::Sequence& sequence() const { return sequence_; }

 private:
  Model model_;
  generate::Sequence sequence_;
  model::Session session_;
};

#define KAEL_SAMPLING_ARGS                                                                                     \
  "max_tokens"_a = 60, "temperature"_a = 0.8f, "top_k"_a = 40, "top_p"_a = 1.0f, "min_p"_a = 0.0f,              \
      "repetition_penalty"_a = 1.0f, "presence_penalty"_a = 0.0f, "frequency_penalty"_a = 0.0f, "seed"_a = 42u, \
      "stop"_a = std::vector<std::string>{}, "ignore_eos"_a = false, "truncate"_a = false,                       \
      "no_repeat_ngram_size"_a = 0, "logit_bias"_a = std::map<std::int32_t, float>{}

// early_stopping as transformers takes it: True, False or "never".
generate::EarlyStopping early_stopping_arg(const py::object& value) {
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>() ? generate::EarlyStopping::when_full
                                                                  : generate::EarlyStopping::heuristic;
  if (py::isinstance<py::str>(value))
    if (const auto mode = generate::early_stopping_from_name(value.cast<std::string>())) return *mode;
  throw kael::ValueError(str("early_stopping must be True, False or \"never\", found ", py::repr(value).cast<std::string>()));
}

// Beam search with generate()'s other options; the sampling ones must keep their defaults.
std::vector<std::string> beam_texts(const Model& m, const std::vector<std::int32_t>& ids,
                                    const generate::GenerateOptions& options, generate::BeamSearchOptions beams) {
  beams.max_new_tokens = options.max_new_tokens;
  beams.ignore_eos = options.ignore_eos;
  beams.truncate_prompt = options.truncate_prompt;
  beams.no_repeat_ngram_size = options.sampling.no_repeat_ngram_size;
  beams.logit_bias = options.sampling.logit_bias;
  if (!options.stop.empty()) throw kael::ValueError("stop is not supported with num_beams > 1");
  std::vector<std::string> texts;
  py::gil_scoped_release release;
  for (auto& h : generate::beam_search(*m.gpt2, ids, beams).sequences) {
    if (h.finish_reason == "stop") h.ids.pop_back();  // <|endoftext|> is not text
    texts.push_back(m.tokenizer->decode(h.ids));
  }
  return texts;
}

}  // namespace

py::dict config_dict(const model::Config& c) {
  py::dict d;
  d["n_layer"] = c.n_layer;
  d["n_head"] = c.n_head;
  d["n_embd"] = c.n_embd;
  d["n_positions"] = c.n_positions;
  d["vocab_size"] = c.vocab_size;
  d["layer_norm_epsilon"] = c.layer_norm_epsilon;
  return d;
}

void init_model(py::module_& m) {
  m.def("bundled_model_dir", &bundled_model_dir,
        "Directory of the small GPT-2 that ships with kael (Model.from_pretrained('bundled') loads it).");
  py::class_<Stream>(m, "GenerationStream", "Iterator over the text pieces of one generation.")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", &Stream::next)
      .def_property_readonly("ids", [](const Stream& s) { return s.sequence().ids(); }, "Generated ids so far.")
      .def_property_readonly("finish_reason", [](const Stream& s) { return s.sequence().finish_reason(); });

  py::class_<Model>(m, "Model", "A GPT-2-family model with its tokenizer, ready to generate.")
      .def_static(
          "from_pretrained",
          [](std::filesystem::path dir, const std::string& dtype, std::optional<int> threads) {
            if (dir == "bundled") dir = bundled_model_dir();
            model::LoadOptions options;
            options.dtype = model::parse_weight_dtype(dtype);  // ValueError listing the choices
            if (threads) {
              if (*threads < 1) throw kael::ValueError(str("threads must be at least 1, got ", *threads));
              model::set_num_threads(*threads);
            }
            py::gil_scoped_release release;
            // The bundled model holds SHA256SUMS: a damaged file is an error naming it, never garbage text.
            if (std::filesystem::exists(dir / "SHA256SUMS")) io::verify_sha256sums(dir);
            Model model;
            model.tokenizer = std::make_shared<text::Tokenizer>(text::Tokenizer::from_directory(dir));
            model.gpt2 = std::make_shared<const model::GPT2>(model::GPT2::load(dir, options));
            return model;
          },
          "dir"_a, "dtype"_a = "f32", "threads"_a = py::none(),
          "Loads DIR/model.safetensors, DIR/config.json (optional), DIR/vocab.json and DIR/merges.txt.\n"
          "DIR 'bundled' is the small model that ships with kael (kael.bundled_model_dir()). A DIR holding\n"
          "SHA256SUMS is checked against it first (kael.ValueError naming a damaged file).\n"
          "dtype: weight storage, converted at load: 'f32', 'f16' (half the bytes), 'int8' (int8 matrix "
          "products; a scale per 32 weights, or per output column on AMX) or 'bf16' (AVX512-BF16 / AMX; "
          "kael.ValueError on a CPU without AVX512-BF16).")
      .def_property_readonly("tokenizer", [](const Model& m) { return m.tokenizer; })
      .def_property_readonly("config", [](const Model& m) { return config_dict(m.gpt2->config()); })
      .def(
          "logits",
          [](const Model& m, const py::object& prompt) {
            const auto ids = prompt_ids(m, prompt);
            py::array_t<float> out(m.gpt2->config().vocab_size);
            float* dst = out.mutable_data();
            {
              py::gil_scoped_release release;
              auto session = m.gpt2->new_session();
              auto logits = m.gpt2->forward(session, ids);
              std::copy(logits.begin(), logits.end(), dst);
            }
            return out;
          },
          "ids"_a, "Next-token logits at the last position of `ids` (list of ids or text), float32 [vocab].")
      .def(
          "generate",
          [](const Model& m, const py::object& prompt, int max_tokens, float temperature, int top_k, float top_p,
             float min_p, float repetition_penalty, float presence_penalty, float frequency_penalty,
             std::uint64_t seed, std::vector<std::string> stop, bool ignore_eos, bool truncate,
             int no_repeat_ngram_size, const std::map<std::int32_t, float>& logit_bias, int n, int num_beams,
             float length_penalty, const py::object& early_stopping, int num_return_sequences) -> py::object {
            const auto ids = prompt_ids(m, prompt);
            const auto options = make_options(max_tokens, temperature, top_k, top_p, min_p, repetition_penalty,
                                              presence_penalty, frequency_penalty, seed, std::move(stop),
                                              ignore_eos, truncate, no_repeat_ngram_size, logit_bias);
            options.sampling.validate(m.gpt2->config().vocab_size);
            if (n < 1 || n > 16) throw kael::ValueError(str("n must be in [1, 16], found ", n));
            if (num_beams < 1) throw kael::ValueError(str("num_beams must be >= 1, found ", num_beams));
            std::vector<std::string> texts;
            if (num_beams > 1) {
              if (n != 1) throw kael::ValueError("n cannot be used with num_beams > 1 (use num_return_sequences)");
              generate::BeamSearchOptions beams;
              beams.num_beams = num_beams;
              beams.length_penalty = length_penalty;
              beams.early_stopping = early_stopping_arg(early_stopping);
              beams.num_return_sequences = num_return_sequences;
              texts = beam_texts(m, ids, options, beams);
              if (num_return_sequences == 1) return utf8_piece(texts[0]);
            } else {
              if (num_return_sequences != 1) throw kael::ValueError("num_return_sequences needs num_beams > 1");
              py::gil_scoped_release release;
              for (int i = 0; i < n; ++i) {  // choice i: seed + i, as `kael generate --n`
                auto one = options;
                one.sampling.seed = seed + static_cast<std::uint64_t>(i);
                texts.push_back(generate::generate(*m.gpt2, *m.tokenizer, ids, one).text);
              }
            }
            if (n == 1 && num_beams == 1) return utf8_piece(texts[0]);
            py::list out;
            for (const auto& t : texts) out.append(utf8_piece(t));
            return out;
          },
          "prompt"_a, KAEL_SAMPLING_ARGS, "n"_a = 1, "num_beams"_a = 1, "length_penalty"_a = 1.0f,
          "early_stopping"_a = false, "num_return_sequences"_a = 1,
          "Generated text (prompt excluded). temperature=0 is greedy; the seed makes sampling reproducible.\n"
          "n > 1: a list of n samples (sample i uses seed + i). num_beams > 1: beam search as transformers'\n"
          "generate(num_beams=..., do_sample=False); a list when num_return_sequences > 1, best first.\n"
          "logit_bias: {token id: bias in [-100, 100]} added to the logits; no_repeat_ngram_size as transformers.")
      .def(
          "stream",
          [](const Model& m, const py::object& prompt, int max_tokens, float temperature, int top_k, float top_p,
             float min_p, float repetition_penalty, float presence_penalty, float frequency_penalty,
             std::uint64_t seed, std::vector<std::string> stop, bool ignore_eos, bool truncate,
             int no_repeat_ngram_size, const std::map<std::int32_t, float>& logit_bias) {
            const auto options = make_options(max_tokens, temperature, top_k, top_p, min_p, repetition_penalty,
                                               presence_penalty, frequency_penalty, seed, std::move(stop),
                                               ignore_eos, truncate, no_repeat_ngram_size, logit_bias);
            options.sampling.validate(m.gpt2->config().vocab_size);
            return Stream(m, prompt_ids(m, prompt), options);
          },
          "prompt"_a, KAEL_SAMPLING_ARGS,
          "Like generate(), but yields text pieces as they are made; they join to generate()'s text.");
}

}  // namespace kael::python
