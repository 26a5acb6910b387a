// The GPT-2 pre-splitter against the pattern's rules (docs/behaviour.md, "Tokenizer"), under the
// book's suite name Gpt2Split and with its examples. Expected pieces were checked with the pattern
// itself; whole-text equality with tiktoken is in tests/python.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "text/pretokenize.hpp"

namespace kael::text {
namespace {

std::vector<std::string> split(std::string_view text) {
  std::vector<std::string> pieces;
  for (std::string_view piece : split_gpt2_words(text)) pieces.emplace_back(piece);
  return pieces;
}

using Pieces = std::vector<std::string>;

TEST(Gpt2Split, WordsPunctuationAndLeadingSpace) {
  EXPECT_EQ(split("Hello, world!"), (Pieces{"Hello", ",", " world", "!"}));
  EXPECT_EQ(split("hello!!! ?? ..."), (Pieces{"hello", "!!!", " ??", " ..."}));
  EXPECT_EQ(split("12345 abc"), (Pieces{"12345", " abc"}));
  EXPECT_EQ(split(" 123"), (Pieces{" 123"}));
  EXPECT_EQ(split("abc123def"), (Pieces{"abc", "123", "def"}));
  EXPECT_EQ(split("abc123 45"), (Pieces{"abc", "123", " 45"}));
  EXPECT_EQ(split("Hello, world!  I'm here 2024"),
            (Pieces{"Hello", ",", " world", "!", " ", " I", "'m", " here", " 2024"}));
  EXPECT_EQ(split(""), Pieces{});
}

TEST(Gpt2Split, ContractionsAreLowercaseAsciiOnly) {
  EXPECT_EQ(split("I'm you're we've they'll he'd it's"),
            (Pieces{"I", "'m", " you", "'re", " we", "'ve", " they", "'ll", " he", "'d", " it", "'s"}));
  EXPECT_EQ(split("I'M YOU'RE"), (Pieces{"I", "'", "M", " YOU", "'", "RE"}));
  EXPECT_EQ(split("don't 's"), (Pieces{"don", "'t", " '", "s"}));
  EXPECT_EQ(split("don't we'll"), (Pieces{"don", "'t", " we", "'ll"}));
  EXPECT_EQ(split("o'clock"), (Pieces{"o", "'", "clock"}));  // 'c is no contraction
  EXPECT_EQ(split("''s"), (Pieces{"''", "s"}));
  EXPECT_EQ(split("  's"), (Pieces{" ", " '", "s"}));
  EXPECT_EQ(split("'"), (Pieces{"'"}));
  EXPECT_EQ(split("'l"), (Pieces{"'", "l"}));
  EXPECT_EQ(split("’s"), (Pieces{"’", "s"}));  // only the ASCII apostrophe
}

TEST(Gpt2Split, WhiteSpaceRunGivesItsLastCharacterToTheNextWord) {
  EXPECT_EQ(split("a  b"), (Pieces{"a", " ", " b"}));
  EXPECT_EQ(split("a\n\nb"), (Pieces{"a", "\n", "\n", "b"}));
  EXPECT_EQ(split("a \n b"), (Pieces{"a", " \n", " b"}));
  EXPECT_EQ(split(" \n x"), (Pieces{" \n", " x"}));
  EXPECT_EQ(split("\t\tx"), (Pieces{"\t", "\t", "x"}));
  EXPECT_EQ(split("x\r\ny"), (Pieces{"x", "\r", "\n", "y"}));
  EXPECT_EQ(split("x   "), (Pieces{"x", "   "}));  // at the end the run stays whole
  EXPECT_EQ(split("  \n"), (Pieces{"  \n"}));
}

TEST(Gpt2Split, UnicodeWhiteSpaceIsWhiteSpaceButFeffIsNot) {
  EXPECT_EQ(split(" \u3000x"), (Pieces{" ", "\u3000", "x"}));
  EXPECT_EQ(split("a\u00a0b"), (Pieces{"a", "\u00a0", "b"}));  // NBSP is not the ASCII space
  EXPECT_EQ(split("a\u2028b"), (Pieces{"a", "\u2028", "b"}));
  EXPECT_EQ(split("a\u0085b"), (Pieces{"a", "\u0085", "b"}));
  EXPECT_EQ(split("\ufeffword"), (Pieces{"\ufeff", "word"}));
  EXPECT_EQ(split("a \ufeff"), (Pieces{"a", " \ufeff"}));
}

TEST(Gpt2Split, UnicodeLettersNumbersAndMarks) {
  EXPECT_EQ(split("h\u00e9llo w\u00f6rld"), (Pieces{"h\u00e9llo", " w\u00f6rld"}));
  EXPECT_EQ(split("\u0663\u0664 x"), (Pieces{"\u0663\u0664", " x"}));  // Arabic-Indic digits
  EXPECT_EQ(split("e\u0301"), (Pieces{"e", "\u0301"}));                // a combining mark is "other"
  EXPECT_EQ(split("日本語のテキスト。"), (Pieces{"日本語のテキスト", "。"}));
  EXPECT_EQ(split("año €5 日本語"), (Pieces{"año", " €", "5", " 日本語"}));
  EXPECT_EQ(split("\u1c89x"), (Pieces{"\u1c89x"}));  // a letter since Unicode 16
  EXPECT_EQ(split("Ⅻ2"), (Pieces{"Ⅻ2"}));            // Nl and Nd are both numbers
}

// An invalid byte is an "other" character of one byte, and the piece holds the byte itself.
TEST(Gpt2Split, KeepsEveryByteOfInvalidUtf8) {
  EXPECT_EQ(split("a\xff\xfe b"), (Pieces{"a", "\xff\xfe", " b"}));
  EXPECT_EQ(split(" \x80"), (Pieces{" \x80"}));
  EXPECT_EQ(split("\xe6\x97"), (Pieces{"\xe6\x97"}));  // a truncated character
  EXPECT_EQ(split("\xed\xa0\x80x"), (Pieces{"\xed\xa0\x80", "x"}));  // an encoded surrogate
  EXPECT_EQ(split("\xc0\xaf!"), (Pieces{"\xc0\xaf!"}));              // an overlong '/'
}

TEST(Gpt2Split, PiecesConcatenateToAnyByteString) {
  std::mt19937 rng(7);
  const std::string alphabet[] = {"a", "Z", " ", "\n", "\t", "'", "s", "1", "!", "\u00e9", "\u3000", "\u00a0",
                                  "日", "\u0301", "\xff", "\xe6", "\x80", "\U0001F600", "\ufeff", "\u2028"};
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    const int length = static_cast<int>(rng() % 24);
    for (int i = 0; i < length; ++i) text += alphabet[rng() % std::size(alphabet)];
    std::string joined;
    for (std::string_view piece : split_gpt2_words(text)) {
      ASSERT_FALSE(piece.empty());
      joined += piece;
    }
    ASSERT_EQ(joined, text);
  }
}

TEST(Gpt2Split, PathologicalInputsSplitInLinearTime) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(split(std::string(1'000'000, 'x')).size(), 1u);
  EXPECT_EQ(split(std::string(1'000'000, ' ')).size(), 1u);
  EXPECT_EQ(split(std::string(1'000'000, ' ') + "x"), (Pieces{std::string(999'999, ' '), " x"}));
  EXPECT_EQ(split(std::string(1'000'000, '\n') + "x").size(), 3u);
  std::string cjk;
  for (int i = 0; i < 300'000; ++i) cjk += "語";
  EXPECT_EQ(split(cjk).size(), 1u);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

}  // namespace
}  // namespace kael::text
