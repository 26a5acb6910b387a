// JSON output helpers (json_text.hpp).
#include "serve/json_text.hpp"

#include <cstdint>
#include <cstdio>

namespace kael::serve {

std::string dump(const Json& value) { return value.dump(-1, ' ', false, Json::error_handler_t::replace); }

bool is_valid_utf8(std::string_view bytes) {
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t n = bytes.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    std::size_t extra = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      extra = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (n - i <= extra) return false;
    for (std::size_t k = 1; k <= extra; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    static constexpr std::uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += extra + 1;
  }
  return true;
}

std::string token_string(std::string_view bytes) {
  if (is_valid_utf8(bytes)) return std::string(bytes);
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
