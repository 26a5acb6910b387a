#include "text/unicode.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "text/unicode_tables.hpp"

namespace kael::text::unicode {
namespace {

bool in_ranges(const CodePointRange* ranges, std::size_t count, std::uint32_t cp) {
  const CodePointRange* end = ranges + count;
  const CodePointRange* it =
      std::upper_bound(ranges, end, cp, [](std::uint32_t v, const CodePointRange& r) { return v < r.first; });
  return it != ranges && cp <= (it - 1)->last;
}

void fill(std::vector<std::uint8_t>& classes, const CodePointRange* ranges, std::size_t count, CharClass cls) {
  for (std::size_t i = 0; i < count; ++i)
    std::fill(classes.begin() + ranges[i].first, classes.begin() + ranges[i].last + 1, static_cast<std::uint8_t>(cls));
}

}  // namespace

CharClass char_class_reference(std::uint32_t cp) {
  if (in_ranges(kLetterRanges, kLetterRangeCount, cp)) return CharClass::Letter;
  if (in_ranges(kNumberRanges, kNumberRangeCount, cp)) return CharClass::Number;
  if (in_ranges(kWhiteSpaceRanges, kWhiteSpaceRangeCount, cp)) return CharClass::Space;
  return CharClass::Other;
}

const ClassTable& ClassTable::get() {
  static const ClassTable table;
  return table;
}

ClassTable::ClassTable() {
  std::vector<std::uint8_t> classes(std::size_t{kBlockCount} << kBlockBits, static_cast<std::uint8_t>(CharClass::Other));
  fill(classes, kLetterRanges, kLetterRangeCount, CharClass::Letter);
  fill(classes, kNumberRanges, kNumberRangeCount, CharClass::Number);
  fill(classes, kWhiteSpaceRanges, kWhiteSpaceRangeCount, CharClass::Space);

  // Deduplicate the 256-entry blocks.
  constexpr std::size_t kBlockSize = std::size_t{1} << kBlockBits;
  std::map<std::string, std::uint16_t> seen;
  std::string distinct;
  for (std::uint32_t block = 0; block < kBlockCount; ++block) {
    std::string bytes(reinterpret_cast<const char*>(classes.data() + block * kBlockSize), kBlockSize);
    auto [it, inserted] = seen.emplace(bytes, static_cast<std::uint16_t>(seen.size()));
    if (inserted) distinct += bytes;
    stage1_[block] = it->second;
  }
  blocks_.assign(distinct.begin(), distinct.end());
}

std::size_t incomplete_utf8_tail(std::string_view bytes) {
  // A character is at most 4 bytes, so an unfinished one starts within the last 3.
  const std::size_t n = bytes.size();
  for (std::size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto lead = static_cast<unsigned char>(bytes[n - back]);
    if ((lead & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    std::size_t need = 0;
    if (lead >= 0xC2 && lead <= 0xDF) need = 2;
    else if (lead >= 0xE0 && lead <= 0xEF) need = 3;
    else if (lead >= 0xF0 && lead <= 0xF4) need = 4;
    if (need <= back) return 0;  // ASCII, invalid lead, or a complete character
    // The bytes after the lead must be a valid start of that character (the second byte has
    // narrower ranges after E0, ED, F0 and F4), else they never become one.
    if (back >= 2) {
      const auto second = static_cast<unsigned char>(bytes[n - back + 1]);
      unsigned lo = 0x80, hi = 0xBF;
      if (lead == 0xE0) lo = 0xA0;
      else if (lead == 0xED) hi = 0x9F;
      else if (lead == 0xF0) lo = 0x90;
      else if (lead == 0xF4) hi = 0x8F;
      if (second < lo || second > hi) return 0;
    }
    return back;
  }
  return 0;
}

}  // namespace kael::text::unicode
