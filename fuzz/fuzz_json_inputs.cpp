// libFuzzer target for the JSON that reaches kael from outside: each input is read as a
// /v1/completions body, a /tokenize and a /detokenize body (as the server does, its error
// turned into the JSON error body it would send) and as a config.json. A request may only be
// refused with an HttpError or a kael error (what the routes answer with a 400), a config only
// with a kael error; anything else escaping, or any sanitizer report, is a bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kael/core/error.hpp"
#include "kael/model/gpt2.hpp"
#include "kael/text/tokenizer.hpp"
#include "serve/http_error.hpp"
#include "serve/json_text.hpp"
#include "serve/request.hpp"

namespace {

// What the server sends for a refused request: the message goes through dump().
template <typename Parse>
void as_the_server_would(Parse&& parse) {
  std::string body;
  try {
    parse();
  } catch (const kael::serve::HttpError& e) {
    body = kael::serve::dump(kael::serve::error_json(e.what(), e.type(), e.param(), e.status()));
  } catch (const kael::Error& e) {
    body = kael::serve::dump(kael::serve::error_json(e.what(), "invalid_request_error", "", 400));
  }
  if (!body.empty() && body.front() != '{') __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto tokenizer = kael::text::Tokenizer::from_directory(KAEL_GPT2_TOKENIZER_DIR);
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  kael::serve::RequestLimits limits;
  limits.n_positions = 64;  // small contexts and prompts keep each run cheap
  limits.max_text_bytes = 4096;
  as_the_server_would([&] { (void)kael::serve::parse_completion_request(text, tokenizer, limits, 1); });
  as_the_server_would([&] { (void)kael::serve::parse_tokenize_request(text, limits); });
  as_the_server_would([&] { (void)kael::serve::parse_detokenize_request(text, limits.vocab_size); });
  try {
    (void)kael::model::Config::from_json(text, "config.json");
  } catch (const kael::Error&) {
  }
  return 0;
}
