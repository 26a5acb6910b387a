#include "text/pretokenize.hpp"

#include <array>

namespace kael::text {
namespace {

using unicode::CharClass;

constexpr std::array<CharClass, 128> kAsciiClasses = [] {
  std::array<CharClass, 128> classes{};
  for (unsigned b = 0; b < 128; ++b) classes[b] = unicode::ascii_class(static_cast<unsigned char>(b));
  return classes;
}();

// The end of the run of characters of class `cls` that continues at `pos`.
std::size_t run_end(const unicode::ClassTable& table, const unsigned char* data, std::size_t size, std::size_t pos,
                    CharClass cls) {
  while (pos < size) {
    if (data[pos] < 0x80) {  // ASCII: one table load, no decoding
      if (kAsciiClasses[data[pos]] != cls) break;
      ++pos;
      continue;
    }
    const unicode::Unit unit = unicode::classify(table, data + pos, size - pos);
    if (unit.cls != cls) break;
    pos += unit.length;
  }
  return pos;
}

// 's 't 'm 'd 're 've 'll: lowercase ASCII only, as in the pattern. Returns the length or 0.
std::size_t contraction_length(const unsigned char* data, std::size_t size, std::size_t pos) {
  if (pos + 1 >= size) return 0;
  const unsigned char a = data[pos + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (pos + 2 >= size) return 0;
  const unsigned char b = data[pos + 2];
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

}  // namespace

std::size_t gpt2_piece_end(const unicode::ClassTable& table, const unsigned char* data, std::size_t size,
                           std::size_t pos) {
  if (data[pos] == '\'') {
    if (const std::size_t n = contraction_length(data, size, pos)) return pos + n;
  }
  // " ?X+" for X = letters, numbers, other: a leading ASCII space joins a following run.
  if (data[pos] == ' ' && pos + 1 < size) {
    const unicode::Unit next = unicode::classify(table, data + pos + 1, size - pos - 1);
    if (next.cls != CharClass::Space) return run_end(table, data, size, pos + 1 + next.length, next.cls);
  }
  const unicode::Unit first = unicode::classify(table, data + pos, size - pos);
  if (first.cls != CharClass::Space) return run_end(table, data, size, pos + first.length, first.cls);

  // White space: "\s+(?!\S)" takes the whole run at the end of the text, else the run less its
  // last character (which then starts the next piece); when that leaves nothing, "\s+" takes
  // the one character.
  std::size_t last = pos;
  std::size_t end = pos + first.length;
  while (end < size) {
    const unicode::Unit unit = unicode::classify(table, data + end, size - end);
    if (unit.cls != CharClass::Space) break;
    last = end;
    end += unit.length;
  }
  if (end == size || last == pos) return end;
  return last;
}

std::vector<std::string_view> split_gpt2_words(std::string_view text) {
  std::vector<std::string_view> pieces;
  split_gpt2(text, [&](std::string_view piece) { pieces.push_back(piece); });
  return pieces;
}

}  // namespace kael::text
