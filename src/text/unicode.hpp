// Code point classes for the GPT-2 pre-splitter and a UTF-8 decoder that never fails.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace kael::text::unicode {

// The four classes the GPT-2 pattern distinguishes. Every code point, and every byte that is
// not part of valid UTF-8, is in exactly one.
enum class CharClass : std::uint8_t { Other = 0, Letter = 1, Number = 2, Space = 3 };

// Fast lookup: a two-stage table built once from the generated ranges. Stage one maps each
// block of 256 code points to one of the distinct blocks of stage two (most blocks are all
// one class, so about 64 KiB in all). Hot loops fetch the table once and call lookup inline.
class ClassTable {
 public:
  static constexpr std::uint32_t kBlockBits = 8;
  static constexpr std::uint32_t kBlockCount = 0x110000 >> kBlockBits;

  static const ClassTable& get();
  // cp <= 0x10FFFF.
  CharClass lookup(std::uint32_t cp) const {
    return static_cast<CharClass>(blocks_[(std::size_t{stage1_[cp >> kBlockBits]} << kBlockBits) | (cp & 0xFF)]);
  }

 private:
  ClassTable();
  std::uint16_t stage1_[kBlockCount];
  std::vector<std::uint8_t> blocks_;  // the distinct blocks, 256 entries each
};

inline CharClass char_class(std::uint32_t cp) { return ClassTable::get().lookup(cp); }
// Reference lookup: binary search in the generated ranges. For tests of the fast one.
CharClass char_class_reference(std::uint32_t cp);

// ASCII classes, for the splitter's fast path.
inline constexpr CharClass ascii_class(unsigned char byte) {
  if ((byte >= 'a' && byte <= 'z') || (byte >= 'A' && byte <= 'Z')) return CharClass::Letter;
  if (byte >= '0' && byte <= '9') return CharClass::Number;
  if (byte == ' ' || (byte >= 0x09 && byte <= 0x0D)) return CharClass::Space;
  return CharClass::Other;
}

inline constexpr std::uint32_t kInvalid = 0xFFFFFFFF;

struct Decoded {
  std::uint32_t cp;  // kInvalid when the byte at the position does not start valid UTF-8
  std::uint32_t length;  // bytes consumed: 1-4 for a code point, 1 for an invalid byte
};

// Decodes the character at data[0] (size > 0). Accepts only shortest forms, no surrogates, no
// code point above U+10FFFF; anything else is one invalid byte, so decoding always advances.
inline Decoded decode_utf8(const unsigned char* data, std::size_t size) {
  const unsigned b0 = data[0];
  if (b0 < 0x80) return {b0, 1};
  auto cont = [&](std::size_t i) { return i < size && (data[i] & 0xC0) == 0x80; };
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    if (cont(1)) return {((b0 & 0x1Fu) << 6) | (data[1] & 0x3Fu), 2};
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (cont(1) && cont(2)) {
      const std::uint32_t cp = ((b0 & 0x0Fu) << 12) | ((data[1] & 0x3Fu) << 6) | (data[2] & 0x3Fu);
      if (cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) return {cp, 3};
    }
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (cont(1) && cont(2) && cont(3)) {
      const std::uint32_t cp =
          ((b0 & 0x07u) << 18) | ((data[1] & 0x3Fu) << 12) | ((data[2] & 0x3Fu) << 6) | (data[3] & 0x3Fu);
      if (cp >= 0x10000 && cp <= 0x10FFFF) return {cp, 4};
    }
  }
  return {kInvalid, 1};
}

// Class and length of the character at data[0]; an invalid byte is Other (it is neither a
// letter, a number nor white space, like U+FFFD).
struct Unit {
  CharClass cls;
  std::uint32_t length;
};
inline Unit classify(const ClassTable& table, const unsigned char* data, std::size_t size) {
  if (data[0] < 0x80) return {ascii_class(data[0]), 1};
  const Decoded d = decode_utf8(data, size);
  return {d.cp == kInvalid ? CharClass::Other : table.lookup(d.cp), d.length};
}

// The number of bytes at the end of `bytes` that are the start of a UTF-8 character still
// missing bytes (0 when the text ends on a complete character or on invalid bytes).
std::size_t incomplete_utf8_tail(std::string_view bytes);

}  // namespace kael::text::unicode
