// The Unicode classes of GPT-2's pre-split pattern as sorted, disjoint, inclusive code point
// ranges. The data is generated (unicode_tables.cpp, by scripts/gen_unicode_tables.py) from one
// pinned Unicode version, the one whose classes equal those of tiktoken's regex engine.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kael::text::unicode {

struct CodePointRange {
  std::uint32_t first;
  std::uint32_t last;  // inclusive
};

extern const char kUnicodeVersion[];
extern const CodePointRange kLetterRanges[];     // \p{L}: Lu Ll Lt Lm Lo
extern const std::size_t kLetterRangeCount;
extern const CodePointRange kNumberRanges[];     // \p{N}: Nd Nl No
extern const std::size_t kNumberRangeCount;
extern const CodePointRange kWhiteSpaceRanges[];  // \s: White_Space
extern const std::size_t kWhiteSpaceRangeCount;

}  // namespace kael::text::unicode
