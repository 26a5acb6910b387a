#include "kael/core/utf8.hpp"

namespace kael::utf8 {

std::optional<std::size_t> find_invalid(std::string_view text) {
  const auto* data = reinterpret_cast<const unsigned char*>(text.data());
  for (std::size_t i = 0; i < text.size();) {
    const Decoded d = decode(data + i, text.size() - i);
    if (d.cp == kInvalid) return i;
    i += d.length;
  }
  return std::nullopt;
}

std::size_t incomplete_tail(std::string_view bytes) {
  // A character is at most 4 bytes, so an unfinished one starts within the last 3.
  const std::size_t n = bytes.size();
  for (std::size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto byte = static_cast<unsigned char>(bytes[n - back]);
    if ((byte & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    const Lead l = lead(byte);
    if (l.length <= back) return 0;  // ASCII, invalid lead, or a complete character
    // The bytes after the lead must be a valid start of that character, else they never become one.
    if (back >= 2) {
      const auto second = static_cast<unsigned char>(bytes[n - back + 1]);
      if (second < l.second_low || second > l.second_high) return 0;
    }
    return back;
  }
  return 0;
}

}  // namespace kael::utf8
