// JSON output helpers (json_text.hpp).
#include "serve/json_text.hpp"

#include <cstdio>

#include "kael/core/utf8.hpp"

namespace kael::serve {

std::string dump(const Json& value) { return value.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string token_string(std::string_view bytes) {
  if (utf8::is_valid(bytes)) return std::string(bytes);
  std::string out = "bytes:";
  for (const unsigned char c : bytes) {
    char hex[5];
    std::snprintf(hex, sizeof hex, "\\x%02x", c);
    out += hex;
  }
  return out;
}

std::size_t char_count(std::string_view bytes) {
  std::size_t count = 0;
  for (const unsigned char c : bytes) count += (c & 0xC0) != 0x80;
  return count;
}

Json error_json(std::string_view message, std::string_view type, std::string_view param, int status) {
  Json error = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", status}};
  if (!param.empty()) error["param"] = param;
  return {{"error", std::move(error)}};
}

}  // namespace kael::serve
