// The code point class tables and the UTF-8 helpers.
#include <gtest/gtest.h>

#include <string>

#include "text/unicode.hpp"
#include "text/unicode_tables.hpp"

namespace kael::text::unicode {
namespace {

TEST(Unicode, PinnedVersionIsTheOneTiktokenUses) { EXPECT_STREQ(kUnicodeVersion, "16.0.0"); }

TEST(Unicode, TwoStageTableEqualsTheRangesOnEveryCodePoint) {
  const ClassTable& table = ClassTable::get();
  for (std::uint32_t cp = 0; cp <= 0x10FFFF; ++cp) ASSERT_EQ(table.lookup(cp), char_class_reference(cp)) << cp;
}

TEST(Unicode, KnownClasses) {
  EXPECT_EQ(char_class('A'), CharClass::Letter);
  EXPECT_EQ(char_class(0x00AA), CharClass::Letter);   // ª Lo
  EXPECT_EQ(char_class(0x01C5), CharClass::Letter);   // ǅ Lt
  EXPECT_EQ(char_class(0x02B0), CharClass::Letter);   // ʰ Lm
  EXPECT_EQ(char_class(0x1C89), CharClass::Letter);   // new in Unicode 16
  EXPECT_EQ(char_class(0x0A7CE), CharClass::Other);   // new in Unicode 17: not yet a letter
  EXPECT_EQ(char_class(0x0663), CharClass::Number);   // Nd
  EXPECT_EQ(char_class(0x216B), CharClass::Number);   // Ⅻ Nl
  EXPECT_EQ(char_class(0x00B2), CharClass::Number);   // ² No
  EXPECT_EQ(char_class(0x10D40), CharClass::Number);  // new in Unicode 16
  for (std::uint32_t cp : {0x09u, 0x0Au, 0x0Bu, 0x0Cu, 0x0Du, 0x20u, 0x85u, 0xA0u, 0x1680u, 0x2000u, 0x200Au, 0x2028u,
                           0x2029u, 0x202Fu, 0x205Fu, 0x3000u})
    EXPECT_EQ(char_class(cp), CharClass::Space) << cp;
  for (std::uint32_t cp : {0xFEFFu, 0x180Eu, 0x200Bu, 0x1Cu, 0x0301u, 0x1F600u, 0xE000u, 0x10FFFFu, 0x0378u})
    EXPECT_EQ(char_class(cp), CharClass::Other) << cp;
  for (unsigned b = 0; b < 128; ++b) EXPECT_EQ(ascii_class(static_cast<unsigned char>(b)), char_class(b)) << b;
}

}  // namespace
}  // namespace kael::text::unicode
