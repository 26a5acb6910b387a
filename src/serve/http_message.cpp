// Request lookups and the quoting of client bytes (http_message.hpp).
#include "serve/http_message.hpp"

#include <algorithm>
#include <cctype>

#include "kael/core/error.hpp"

namespace kael::serve {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::string quote_prefix(std::string_view bytes, std::size_t max_bytes) {
  std::string out = "'";
  for (const char c : bytes.substr(0, max_bytes)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '\\' && c != '\'') {
      out += c;
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  out += '\'';
  if (bytes.size() > max_bytes) out += str("... (", bytes.size(), " bytes)");
  return out;
}

bool Request::has_header(std::string_view name) const {
  return std::any_of(fields.begin(), fields.end(), [&](const auto& field) { return iequals(field.first, name); });
}

std::string Request::header(std::string_view name) const {
  for (const auto& [field, value] : fields)
    if (iequals(field, name)) return value;
  return {};
}

}  // namespace kael::serve
