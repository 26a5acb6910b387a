// Code point classes for the GPT-2 pre-splitter, over the UTF-8 decoder of kael/core/utf8.hpp
// (which never fails: an invalid byte is its own unit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "kael/core/utf8.hpp"

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

// Class and length of the character at data[0]; an invalid byte is Other (it is neither a
// letter, a number nor white space, like U+FFFD).
struct Unit {
  CharClass cls;
  std::uint32_t length;
};
inline Unit classify(const ClassTable& table, const unsigned char* data, std::size_t size) {
  if (data[0] < 0x80) return {ascii_class(data[0]), 1};
  const utf8::Decoded d = utf8::decode(data, size);
  return {d.cp == utf8::kInvalid ? CharClass::Other : table.lookup(d.cp), d.length};
}

}  // namespace kael::text::unicode
