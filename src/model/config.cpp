// config.json -> Config (docs/behaviour.md, "The GPT-2 checkpoint"). Keys kael does not read
// (dropout rates, token ids, summary heads) are ignored; keys that would change the computation
// must hold the value kael implements, so a checkpoint kael cannot run fails at load rather than
// giving wrong logits.
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "kael/core/error.hpp"
#include "kael/core/file.hpp"
#include "kael/core/json.hpp"
#include "kael/model/gpt2.hpp"

namespace kael::model {
namespace {

using nlohmann::json;

// Upper bounds keep every size product (KV cache, scratch, weights) within int64 and every
// id within int32, so later arithmetic cannot overflow on a hostile config.
constexpr std::int64_t kMaxLayers = 4096;
constexpr std::int64_t kMaxWidth = 1 << 16;      // n_embd, n_inner
constexpr std::int64_t kMaxPositions = 1 << 20;
constexpr std::int64_t kMaxVocab = 1 << 24;

void read_int(const json& doc, const char* key, int& out, std::string_view source, bool nullable = false) {
  const auto it = doc.find(key);
  if (it == doc.end()) return;
  if (nullable && it->is_null()) return;
  // A whole number past int64 arrives as unsigned or as a float: both are "too large", not
  // "not a positive integer".
  constexpr int kMax = std::numeric_limits<int>::max();
  const bool whole_float = it->is_number_float() && std::isfinite(it->get<double>()) &&
                           std::floor(it->get<double>()) == it->get<double>();
  if (it->is_number_unsigned() || (whole_float && it->get<double>() > kMax)) {
    if (!it->is_number_unsigned() || it->get<std::uint64_t>() > static_cast<std::uint64_t>(kMax))
      throw ValueError(str(source, ": ", key, " is ", it->dump(), ", which is too large (at most ", kMax, ")"));
  }
  if (!it->is_number_integer())
    throw ValueError(str(source, ": ", key, " is ", it->dump(), ", expected a positive integer"));
  const auto value = it->get<std::int64_t>();
  if (value <= 0) throw ValueError(str(source, ": ", key, " is ", value, ", expected a positive integer"));
  if (value > kMax) throw ValueError(str(source, ": ", key, " is ", value, ", which is too large (at most ", kMax, ")"));
  out = static_cast<int>(value);
}

// A boolean key that, when present, must hold `supported`.
void require_bool(const json& doc, const char* key, bool supported, std::string_view source) {
  const auto it = doc.find(key);
  if (it == doc.end() || it->is_null()) return;
  if (!it->is_boolean()) throw ValueError(str(source, ": ", key, " is ", it->dump(), ", expected true or false"));
  if (it->get<bool>() != supported)
    throw ValueError(str(source, ": ", key, " is ", it->dump(), ", kael supports only ", supported ? "true" : "false"));
}

void require_string(const json& doc, const char* key, std::initializer_list<std::string_view> supported,
                    std::string_view source) {
  const auto it = doc.find(key);
  if (it == doc.end()) return;
  if (it->is_string())
    for (std::string_view s : supported)
      if (it->get_ref<const std::string&>() == s) return;
  throw ValueError(str(source, ": ", key, " is ", it->dump(), ", kael supports only \"", *supported.begin(), "\""));
}

}  // namespace

void Config::validate(std::string_view source) const {
  const auto check = [&](const char* what, std::int64_t value, std::int64_t max) {
    if (value <= 0 || value > max) throw ValueError(str(source, ": ", what, " is ", value, ", expected 1 to ", max));
  };
  check("n_layer", n_layer, kMaxLayers);
  check("n_embd", n_embd, kMaxWidth);
  check("n_head", n_head, n_embd);
  check("n_positions", n_positions, kMaxPositions);
  check("vocab_size", vocab_size, kMaxVocab);
  if (n_inner != 0) check("n_inner", n_inner, kMaxWidth);
  if (n_embd % n_head != 0)
    throw ValueError(str(source, ": n_embd ", n_embd, " is not divisible by n_head ", n_head));
  if (!(layer_norm_epsilon > 0.0f) || !std::isfinite(layer_norm_epsilon))
    throw ValueError(str(source, ": layer_norm_epsilon is ", layer_norm_epsilon, ", expected a positive number"));
}

Config Config::from_json(std::string_view text, std::string_view source) {
  const json doc = kael::json::parse(text, source);
  if (!doc.is_object()) throw ValueError(str(source, ": is a JSON ", doc.type_name(), ", expected an object"));

  Config config;
  read_int(doc, "n_layer", config.n_layer, source);
  read_int(doc, "n_head", config.n_head, source);
  read_int(doc, "n_embd", config.n_embd, source);
  // Old configs name the context length n_ctx; n_positions wins when both are present.
  read_int(doc, "n_ctx", config.n_positions, source);
  read_int(doc, "n_positions", config.n_positions, source);
  read_int(doc, "vocab_size", config.vocab_size, source);
  read_int(doc, "n_inner", config.n_inner, source, /*nullable=*/true);
  if (const auto it = doc.find("layer_norm_epsilon"); it != doc.end()) {
    if (!it->is_number()) throw ValueError(str(source, ": layer_norm_epsilon is ", it->dump(), ", expected a number"));
    config.layer_norm_epsilon = it->get<float>();
  }
  if (const auto it = doc.find("tie_word_embeddings"); it != doc.end() && !it->is_null()) {
    if (!it->is_boolean()) throw ValueError(str(source, ": tie_word_embeddings is ", it->dump(), ", expected true or false"));
    config.tie_word_embeddings = it->get<bool>();
  }
  require_string(doc, "model_type", {"gpt2"}, source);
  // gelu_pytorch_tanh is the same tanh formula under torch's name.
  require_string(doc, "activation_function", {"gelu_new", "gelu_pytorch_tanh"}, source);
  require_bool(doc, "scale_attn_weights", true, source);
  require_bool(doc, "scale_attn_by_inverse_layer_idx", false, source);
  require_bool(doc, "add_cross_attention", false, source);
  config.validate(source);
  return config;
}

Config Config::from_json_file(const std::filesystem::path& path) {
  return from_json(read_regular_file(path, "config file", kMaxConfigBytes), str("'", path.string(), "'"));
}

Config Config::from_directory(const std::filesystem::path& dir) {
  const auto path = dir / "config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return Config{};
  return from_json_file(path);
}

std::string Config::to_json(std::string_view torch_dtype) const {
  nlohmann::ordered_json doc;
  doc["architectures"] = {"GPT2LMHeadModel"};
  doc["model_type"] = "gpt2";
  doc["vocab_size"] = vocab_size;
  doc["n_positions"] = n_positions;
  doc["n_ctx"] = n_positions;
  doc["n_embd"] = n_embd;
  doc["n_layer"] = n_layer;
  doc["n_head"] = n_head;
  doc["n_inner"] = n_inner > 0 ? nlohmann::ordered_json(n_inner) : nlohmann::ordered_json();
  doc["activation_function"] = "gelu_new";
  doc["layer_norm_epsilon"] = layer_norm_epsilon;
  doc["resid_pdrop"] = 0.1;
  doc["embd_pdrop"] = 0.1;
  doc["attn_pdrop"] = 0.1;
  doc["initializer_range"] = 0.02;
  doc["scale_attn_weights"] = true;
  doc["scale_attn_by_inverse_layer_idx"] = false;
  doc["reorder_and_upcast_attn"] = false;
  doc["tie_word_embeddings"] = tie_word_embeddings;
  doc["bos_token_id"] = 50256;
  doc["eos_token_id"] = 50256;
  doc["use_cache"] = true;
  doc["torch_dtype"] = torch_dtype;
  return doc.dump(2) + "\n";
}

}  // namespace kael::model
