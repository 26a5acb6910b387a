#include "io/utf8.hpp"

#include <cstdint>

namespace kael::io {

std::optional<std::size_t> find_invalid_utf8(std::string_view text) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t size = text.size();
  std::size_t i = 0;
  while (i < size) {
    const unsigned char lead = bytes[i];
    if (lead < 0x80) {
      ++i;
      continue;
    }
    // Length and the allowed range of the second byte, per the RFC 3629 table; the narrowed
    // ranges after E0, ED, F0 and F4 are what exclude overlongs, surrogates and > U+10FFFF.
    std::size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;
      if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;
    } else {
      return i;  // continuation byte as lead, C0/C1 overlong leads, F5..FF
    }
    if (size - i < length) return i;
    if (bytes[i + 1] < low || bytes[i + 1] > high) return i;
    for (std::size_t k = 2; k < length; ++k)
      if (bytes[i + k] < 0x80 || bytes[i + k] > 0xBF) return i;
    i += length;
  }
  return std::nullopt;
}

}  // namespace kael::io
