// Reading outside JSON with its nesting bounded (kael/core/json.hpp).
#include "kael/core/json.hpp"

#include <string>

#include "kael/core/error.hpp"

namespace kael::json {
namespace {

// nlohmann's messages quote the token they stopped in, which may be most of the input.
std::string bounded(std::string_view message) {
  constexpr std::size_t kMax = 200;
  if (message.size() <= kMax) return std::string(message);
  return str(message.substr(0, kMax), "... (", message.size(), " bytes)");
}

template <typename Json>
Json parse_checked(std::string_view text, std::string_view source, int max_depth,
                   const typename Json::parser_callback_t& callback) {
  check_depth(text, source, max_depth);
  // nlohmann's lexer takes a NUL byte for the end of the input, so "{}\0anything" would parse;
  // NUL is not JSON anywhere (a string holds it escaped).
  if (const auto nul = text.find('\0'); nul != std::string_view::npos)
    throw ValueError(str(source, " is not valid JSON: a NUL byte at offset ", nul));
  try {
    return Json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const typename Json::exception& e) {
    throw ValueError(str(source, " is not valid JSON: ", bounded(e.what())));
  }
}

}  // namespace

void check_depth(std::string_view text, std::string_view source, int max_depth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth)
        throw ValueError(str(source, " nests deeper than ", max_depth, " levels (at byte ", i, ")"));
    } else if (c == '}' || c == ']') {
      --depth;  // a stray closer is a parse error there, and the parser stops before any deeper nesting
    }
  }
}

nlohmann::json parse(std::string_view text, std::string_view source, int max_depth,
                     const nlohmann::json::parser_callback_t& callback) {
  return parse_checked<nlohmann::json>(text, source, max_depth, callback);
}

nlohmann::ordered_json parse_ordered(std::string_view text, std::string_view source, int max_depth) {
  return parse_checked<nlohmann::ordered_json>(text, source, max_depth, nullptr);
}

}  // namespace kael::json
