// UTF-8 as RFC 3629 defines it, the one set of rules every layer uses (safetensors headers,
// the tokenizer's decoder, the server's JSON): shortest forms only, no surrogates
// (U+D800..U+DFFF), nothing past U+10FFFF, no truncated sequences.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kael::utf8 {

// What a lead byte promises: the sequence's length (0 for a byte that cannot lead) and the
// range of the byte after it. The narrowed ranges after E0, ED, F0 and F4 are what exclude
// overlong forms, surrogates and code points past U+10FFFF.
struct Lead {
  std::uint32_t length;
  unsigned char second_low = 0x80, second_high = 0xBF;
};
inline constexpr Lead lead(unsigned char byte) {
  if (byte < 0x80) return {1};
  if (byte >= 0xC2 && byte <= 0xDF) return {2};
  if (byte == 0xE0) return {3, 0xA0, 0xBF};
  if (byte == 0xED) return {3, 0x80, 0x9F};
  if (byte >= 0xE1 && byte <= 0xEF) return {3};
  if (byte == 0xF0) return {4, 0x90, 0xBF};
  if (byte == 0xF4) return {4, 0x80, 0x8F};
  if (byte >= 0xF1 && byte <= 0xF3) return {4};
  return {0};  // a continuation byte, C0/C1 (always overlong), F5..FF
}

inline constexpr std::uint32_t kInvalid = 0xFFFFFFFF;

struct Decoded {
  std::uint32_t cp;      // kInvalid when the bytes at the position do not start valid UTF-8
  std::uint32_t length;  // bytes consumed: 1-4 for a code point, 1 for an invalid byte
};

// Decodes the character at data[0] (size > 0). Anything that is not a whole, valid character
// is one invalid byte, so decoding always advances.
inline Decoded decode(const unsigned char* data, std::size_t size) {
  const unsigned char b0 = data[0];
  if (b0 < 0x80) return {b0, 1};
  const Lead l = lead(b0);
  if (l.length == 0 || size < l.length || data[1] < l.second_low || data[1] > l.second_high) return {kInvalid, 1};
  std::uint32_t cp = b0 & (0x7Fu >> l.length);
  for (std::uint32_t k = 1; k < l.length; ++k) {
    if (k >= 2 && (data[k] & 0xC0) != 0x80) return {kInvalid, 1};
    cp = (cp << 6) | (data[k] & 0x3Fu);
  }
  return {cp, l.length};
}

// The byte offset of the first invalid sequence, or nullopt when `text` is valid UTF-8.
std::optional<std::size_t> find_invalid(std::string_view text);

inline bool is_valid(std::string_view text) { return !find_invalid(text).has_value(); }

// The number of bytes at the end of `bytes` that are the start of a character still missing
// bytes (0 when the text ends on a complete character or on bytes that can never become one).
std::size_t incomplete_tail(std::string_view bytes);

}  // namespace kael::utf8
