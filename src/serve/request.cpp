// Request parsing and validation (request.hpp).
#include "serve/request.hpp"

#include <cctype>
#include <cmath>
#include <map>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "kael/core/error.hpp"
#include "kael/core/json.hpp"
#include "serve/http_error.hpp"

namespace kael::serve {
namespace {

// Requests are read with the plain (sorted, hashed-lookup) json; responses use ordered Json.
using Json = nlohmann::json;

HttpError bad(const std::string& param, const std::string& message) { return HttpError(400, message, param); }

// Parses `body` as a JSON object, its nesting bounded by the one entry point (messages quote
// values with dump(), which recurses per level).
Json parse_object(std::string_view body) {
  Json value;
  try {
    value = json::parse(body, "the request body");
  } catch (const ValueError& e) {
    throw HttpError(400, e.what());
  }
  if (!value.is_object())
    throw HttpError(400, str("the request body must be a JSON object, found ", value.type_name()));
  return value;
}

// A value quoted in a message: its JSON text, cut short (a field may hold most of the body).
std::string shown(const Json& value) {
  constexpr std::size_t kMax = 64;
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > kMax) text = str(text.substr(0, kMax), "... (", text.size(), " bytes)");
  return text;
}

// Typed access to optional fields: absent and null both mean "use the default".
class Fields {
 public:
  explicit Fields(const Json& object) : object_(object) {}

  const Json* get(const std::string& name) const {
    const auto it = object_.find(name);
    if (it == object_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  std::optional<bool> boolean(const std::string& name) const {
    const Json* v = get(name);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) throw bad(name, str("'", name, "' must be a boolean, found ", v->type_name()));
    return v->get<bool>();
  }

  std::optional<std::int64_t> integer(const std::string& name, std::int64_t lo, std::int64_t hi) const {
    const Json* v = get(name);
    if (!v) return std::nullopt;
    if (!v->is_number_integer())
      throw bad(name, str("'", name, "' must be an integer, found ", describe(*v)));
    // Unsigned values past INT64_MAX would wrap in get<int64_t>: reject them first.
    if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
      throw out_of_range(name, lo, hi, *v);
    const auto x = v->get<std::int64_t>();
    if (x < lo || x > hi) throw out_of_range(name, lo, hi, *v);
    return x;
  }

  // A number in [lo, hi], or (lo, hi] when `lo_open`.
  std::optional<double> number(const std::string& name, double lo, double hi, bool lo_open = false) const {
    const Json* v = get(name);
    if (!v) return std::nullopt;
    if (!v->is_number()) throw bad(name, str("'", name, "' must be a number, found ", describe(*v)));
    const double x = v->get<double>();
    if (!std::isfinite(x) || x > hi || (lo_open ? x <= lo : x < lo))
      throw bad(name, str("'", name, "' must be in ", lo_open ? "(" : "[", lo, ", ", hi, "], found ", v->dump()));
    return x;
  }

  std::optional<std::string> string(const std::string& name) const {
    const Json* v = get(name);
    if (!v) return std::nullopt;
    if (!v->is_string()) throw bad(name, str("'", name, "' must be a string, found ", v->type_name()));
    return v->get<std::string>();
  }

  static std::string describe(const Json& v) {
    if (v.is_number_float()) {
      // JSON has no integer limit: a whole number past 64 bits arrives as a double.
      const double x = v.get<double>();
      if (std::isfinite(x) && std::floor(x) == x && std::fabs(x) >= 9223372036854775808.0)  // 2^63
        return str("the integer ", v.dump(), ", which is too large for 64 bits");
      return str("the non-integer ", v.dump());
    }
    return v.type_name();
  }

 private:
  static HttpError out_of_range(const std::string& name, std::int64_t lo, std::int64_t hi, const Json& v) {
    return bad(name, str("'", name, "' must be in [", lo, ", ", hi, "], found ", v.dump()));
  }

  const Json& object_;
};

// One token id from JSON, checked against the vocabulary.
std::int32_t token_id(const Json& v, const std::string& param, std::int64_t vocab_size) {
  if (!v.is_number_integer()) throw bad(param, str("token ids in '", param, "' must be integers, found ", Fields::describe(v)));
  const bool negative = v.is_number_integer() && !v.is_number_unsigned() && v.get<std::int64_t>() < 0;
  if (negative || v.get<std::uint64_t>() >= static_cast<std::uint64_t>(vocab_size))
    throw bad(param, str("token id ", v.dump(), " in '", param, "' is outside the vocabulary [0, ", vocab_size, ")"));
  return static_cast<std::int32_t>(v.get<std::int64_t>());
}

std::vector<std::int32_t> token_ids(const Json& array, const std::string& param, std::int64_t vocab_size) {
  std::vector<std::int32_t> ids;
  ids.reserve(array.size());
  for (const auto& v : array) ids.push_back(token_id(v, param, vocab_size));
  return ids;
}

void check_text_size(const std::string& text, const char* param, const RequestLimits& limits) {
  if (text.size() > limits.max_text_bytes)
    throw HttpError(413, str("'", param, "' is ", text.size(), " bytes; the server tokenizes at most ",
                             limits.max_text_bytes, " bytes per request"),
                    param);
}

// OpenAI's prompt forms: "text", ["text"], [1, 2, 3] or [[1, 2, 3]]. One prompt only (n = 1).
void read_prompt(const Json& body, const text::Tokenizer& tokenizer, const RequestLimits& limits,
                 CompletionRequest& out) {
  const auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) throw bad("prompt", "'prompt' is required");
  const Json* prompt = &*it;
  if (prompt->is_array() && prompt->size() == 1 && (prompt->at(0).is_string() || prompt->at(0).is_array()))
    prompt = &prompt->at(0);  // a batch of one
  if (prompt->is_string()) {
    check_text_size(prompt->get_ref<const std::string&>(), "prompt", limits);
    out.prompt_text = prompt->get<std::string>();
    out.prompt_ids = tokenizer.encode(out.prompt_text);
  } else if (prompt->is_array()) {
    if (!prompt->empty() && (prompt->at(0).is_string() || prompt->at(0).is_array()))
      throw bad("prompt", prompt == &*it ? str("only one prompt per request is supported, found ", prompt->size())
                                         : std::string("'prompt' must be a string or token ids, or a list of one of those"));
    out.prompt_ids = token_ids(*prompt, "prompt", limits.vocab_size);
    out.prompt_text = tokenizer.decode(out.prompt_ids);
  } else {
    throw bad("prompt", str("'prompt' must be a string or an array of token ids, found ", prompt->type_name()));
  }
  if (out.prompt_ids.empty()) throw bad("prompt", "'prompt' is empty: generation needs at least one prompt token");
}

std::vector<std::string> read_stop(const Fields& fields, const RequestLimits& limits) {
  const Json* v = fields.get("stop");
  if (!v) return {};
  std::vector<std::string> stops;
  if (v->is_string()) {
    stops.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->size() > static_cast<std::size_t>(limits.max_stop))
      throw bad("stop", str("'stop' takes at most ", limits.max_stop, " strings, found ", v->size()));
    for (const auto& s : *v) {
      if (!s.is_string()) throw bad("stop", str("'stop' must hold strings, found ", s.type_name()));
      stops.push_back(s.get<std::string>());
    }
  } else {
    throw bad("stop", str("'stop' must be a string or an array of strings, found ", v->type_name()));
  }
  for (const auto& s : stops) {
    if (s.empty()) throw bad("stop", "'stop' strings must not be empty");
    if (s.size() > limits.max_stop_bytes)
      throw bad("stop", str("'stop' strings must be at most ", limits.max_stop_bytes, " bytes, found ", s.size()));
  }
  return stops;
}

// OpenAI's logit_bias: {"50256": -100, ...}, keys token ids as strings, values in [-100, 100].
std::map<std::int32_t, float> read_logit_bias(const Fields& fields, const RequestLimits& limits) {
  std::map<std::int32_t, float> out;
  const Json* v = fields.get("logit_bias");
  if (!v) return out;
  if (!v->is_object()) throw bad("logit_bias", str("'logit_bias' must be an object, found ", v->type_name()));
  for (const auto& [key, value] : v->items()) {
    std::size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (key.empty() || used != key.size() || !std::isdigit(static_cast<unsigned char>(key[0])))
      throw bad("logit_bias", str("'logit_bias' keys must be token ids, found \"", key, "\""));
    if (id >= limits.vocab_size)
      throw bad("logit_bias", str("token id ", key, " in 'logit_bias' is outside the vocabulary [0, ", limits.vocab_size, ")"));
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < -100.0 ||
        value.get<double>() > 100.0)
      throw bad("logit_bias", str("'logit_bias' values must be numbers in [-100, 100], found ", shown(value),
                                  " for token ", key));
    out[static_cast<std::int32_t>(id)] = static_cast<float>(value.get<double>());
  }
  return out;
}

// n and best_of (OpenAI: best_of candidates, the n best returned; best_of cannot stream unless
// it equals n), both at most limits.max_choices.
void read_choices(const Fields& fields, const RequestLimits& limits, CompletionRequest& out) {
  const auto max = std::numeric_limits<std::int64_t>::max();
  const auto capped = [&](const char* name) -> std::optional<std::int64_t> {
    const auto value = fields.integer(name, 1, max);
    if (value && *value > limits.max_choices)
      throw bad(name, str("'", name, "' must be at most ", limits.max_choices, " on this server, found ", *value));
    return value;
  };
  out.n = static_cast<int>(capped("n").value_or(1));
  out.best_of = static_cast<int>(capped("best_of").value_or(out.n));
  if (out.best_of < out.n)
    throw bad("best_of", str("'best_of' (", out.best_of, ") must be >= 'n' (", out.n, ")"));
}

// use_beam_search (vLLM's extension of the API): best_of beams, the n best returned, with
// length_penalty and early_stopping as transformers takes them. Beam search does not sample,
// so the sampling fields and streaming are refused with it, and so is logprobs.
void read_beam_search(const Json& body, const Fields& fields, CompletionRequest& out) {
  out.use_beam_search = fields.boolean("use_beam_search").value_or(false);
  if (!out.use_beam_search) {
    for (const char* name : {"length_penalty", "early_stopping"})
      if (fields.get(name)) throw bad(name, str("'", name, "' needs \"use_beam_search\": true"));
    return;
  }
  if (out.stream) throw bad("stream", "beam search cannot be streamed (the best beams are known only at the end)");
  if (out.options.logprobs) throw bad("logprobs", "'logprobs' is not supported with beam search");
  if (!out.options.stop.empty()) throw bad("stop", "'stop' is not supported with beam search");
  if (const auto t = fields.number("temperature", 0.0, 2.0); t && *t != 0.0)
    throw bad("temperature", "beam search does not sample: 'temperature' must be 0 or absent");
  for (const char* name : {"top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty"})
    if (body.contains(name) && !body.at(name).is_null())
      throw bad(name, str("beam search does not sample: '", name, "' cannot be used with it"));
  auto& b = out.beams;
  b.num_beams = out.best_of;
  b.num_return_sequences = out.n;
  if (b.num_beams < 2) throw bad("best_of", "beam search needs 'best_of' (the number of beams) >= 2");
  b.length_penalty = static_cast<float>(fields.number("length_penalty", -100.0, 100.0).value_or(1.0));
  if (const Json* es = fields.get("early_stopping")) {
    if (es->is_boolean())
      b.early_stopping = es->get<bool>() ? generate::EarlyStopping::when_full : generate::EarlyStopping::heuristic;
    else if (es->is_string() && es->get<std::string>() == "never")
      b.early_stopping = generate::EarlyStopping::never;
    else
      throw bad("early_stopping", str("'early_stopping' must be true, false or \"never\", found ", shown(*es)));
  }
  b.max_new_tokens = out.options.max_new_tokens;
  if (b.max_new_tokens < 1) throw bad("max_tokens", "beam search needs 'max_tokens' >= 1");
  b.ignore_eos = out.options.ignore_eos;
  b.no_repeat_ngram_size = out.options.sampling.no_repeat_ngram_size;
  b.logit_bias = out.options.sampling.logit_bias;
}

// Fields OpenAI defines that kael does not implement: accepted only at their neutral value.
void reject_unsupported(const Fields& fields) {
  if (auto suffix = fields.string("suffix"); suffix && !suffix->empty())
    throw bad("suffix", "'suffix' is not supported");
}

}  // namespace

CompletionRequest parse_completion_request(std::string_view body_text, const text::Tokenizer& tokenizer,
                                           const RequestLimits& limits, std::uint64_t next_seed) {
  const Json body = parse_object(body_text);
  const Fields fields(body);
  CompletionRequest out;
  out.model = fields.string("model").value_or("");
  reject_unsupported(fields);
  read_prompt(body, tokenizer, limits, out);

  auto& options = out.options;
  auto& s = options.sampling;
  options.max_new_tokens =
      // Range-checked loosely here; the context check below gives the useful message.
      static_cast<int>(fields.integer("max_tokens", 0, 1 << 30).value_or(limits.default_max_tokens));
  s.temperature = static_cast<float>(fields.number("temperature", 0.0, 2.0).value_or(1.0));
  s.top_p = static_cast<float>(fields.number("top_p", 0.0, 1.0, /*lo_open=*/true).value_or(1.0));
  s.top_k = static_cast<int>(fields.integer("top_k", 0, limits.vocab_size).value_or(0));
  s.min_p = static_cast<float>(fields.number("min_p", 0.0, 1.0).value_or(0.0));
  s.presence_penalty = static_cast<float>(fields.number("presence_penalty", -2.0, 2.0).value_or(0.0));
  s.frequency_penalty = static_cast<float>(fields.number("frequency_penalty", -2.0, 2.0).value_or(0.0));
  s.repetition_penalty = static_cast<float>(fields.number("repetition_penalty", 0.0, 100.0, true).value_or(1.0));
  // Any 64-bit integer is a seed (OpenAI allows negative ones): reinterpret it as unsigned.
  if (const Json* seed = fields.get("seed")) {
    if (!seed->is_number_integer()) throw bad("seed", str("'seed' must be an integer, found ", Fields::describe(*seed)));
    s.seed = seed->is_number_unsigned() ? seed->get<std::uint64_t>()
                                        : static_cast<std::uint64_t>(seed->get<std::int64_t>());
  } else {
    s.seed = next_seed;
  }
  options.stop = read_stop(fields, limits);
  options.ignore_eos = fields.boolean("ignore_eos").value_or(false);
  if (auto n = fields.integer("logprobs", 0, limits.max_logprobs)) {
    options.logprobs = true;
    options.top_logprobs = static_cast<int>(*n);
  }
  out.return_logprobs = options.logprobs;
  s.logit_bias = read_logit_bias(fields, limits);
  s.no_repeat_ngram_size = static_cast<int>(fields.integer("no_repeat_ngram_size", 0, limits.n_positions).value_or(0));
  out.echo = fields.boolean("echo").value_or(false);
  out.stream = fields.boolean("stream").value_or(false);
  read_choices(fields, limits, out);
  read_beam_search(body, fields, out);
  if (out.stream && out.best_of > out.n && !out.use_beam_search)
    throw bad("best_of", "'best_of' larger than 'n' cannot be streamed (the best are known only at the end)");
  if (out.best_of > out.n && !out.use_beam_search) options.logprobs = true;  // ranking needs each token's log-probability
  if (const Json* so = fields.get("stream_options")) {
    if (!so->is_object()) throw bad("stream_options", str("'stream_options' must be an object, found ", so->type_name()));
    out.include_usage = Fields(*so).boolean("include_usage").value_or(true);
  }

  const std::size_t total = out.prompt_ids.size() + static_cast<std::size_t>(options.max_new_tokens);
  if (total > static_cast<std::size_t>(limits.n_positions))
    throw HttpError(400,
                    str("this model's maximum context length is ", limits.n_positions, " tokens, however you requested ",
                        total, " tokens (", out.prompt_ids.size(), " in your prompt; ", options.max_new_tokens,
                        " for the completion); reduce the prompt or max_tokens"),
                    "max_tokens");
  return out;
}

TokenizeRequest parse_tokenize_request(std::string_view body_text, const RequestLimits& limits) {
  const Json body = parse_object(body_text);
  const Fields fields(body);
  TokenizeRequest out;
  auto text = fields.string("text");
  if (!text) text = fields.string("prompt");
  if (!text) throw bad("text", "'text' is required");
  check_text_size(*text, "text", limits);
  out.text = std::move(*text);
  out.allow_special = fields.boolean("allow_special").value_or(false);
  return out;
}

std::vector<std::int32_t> parse_detokenize_request(std::string_view body_text, std::int64_t vocab_size) {
  const Json body = parse_object(body_text);
  const char* name = body.contains("ids") ? "ids" : "tokens";
  const auto it = body.find(name);
  if (it == body.end() || it->is_null()) throw bad("ids", "'ids' is required");
  if (!it->is_array()) throw bad(name, str("'", name, "' must be an array of token ids, found ", it->type_name()));
  return token_ids(*it, name, vocab_size);
}

}  // namespace kael::serve
