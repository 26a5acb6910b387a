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

}  // namespace kael::text::unicode
