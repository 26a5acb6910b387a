// BPE merging: rank order on hand-made files, and the fast strategies against the plain
// reference on the real GPT-2 ranks.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <random>
#include <string>
#include <vector>

#include "kael/text/tokenizer.hpp"
#include "text/bpe.hpp"
#include "text/byte_symbols.hpp"
#include "text/tokenizer_impl.hpp"
#include "kael/core/file.hpp"
#include "text/vocab_files.hpp"

namespace kael::text {
namespace {

using Ids = std::vector<std::int32_t>;

std::string json_string(const std::string& text) { return nlohmann::json(text).dump(); }

// A vocabulary of the 256 bytes (ids 0-255 in byte order) and then one token per merge.
struct Files {
  std::string vocab_json, merges_txt;
};
Files tiny_files(const std::vector<std::pair<std::string, std::string>>& merges) {
  Files files;
  files.vocab_json = "{";
  for (int b = 0; b < 256; ++b)
    files.vocab_json += json_string(bytes_to_symbols(std::string(1, static_cast<char>(b)))) + ":" + std::to_string(b) + ",";
  files.merges_txt = "#version: 0.2\n";
  int id = 256;
  for (const auto& [left, right] : merges) {
    files.vocab_json += json_string(bytes_to_symbols(left + right)) + ":" + std::to_string(id++) + ",";
    files.merges_txt += bytes_to_symbols(left) + " " + bytes_to_symbols(right) + "\n";
  }
  files.vocab_json.back() = '}';
  return files;
}

std::unique_ptr<Tokenizer::Impl> tiny(const std::vector<std::pair<std::string, std::string>>& merges) {
  const Files files = tiny_files(merges);
  return build_tokenizer(files.vocab_json, "vocab.json", files.merges_txt, "merges.txt");
}

Ids scan(const Tokenizer::Impl& impl, std::string_view piece) {
  Ids ids;
  bpe_merge_scan(impl.bpe, piece, ids);
  return ids;
}
Ids heap(const Tokenizer::Impl& impl, std::string_view piece) {
  Ids ids;
  bpe_merge_heap(impl.bpe, piece, ids);
  return ids;
}

// The book's worked example: "h e" (rank 0), "e l" (1), "he l" (2) make "hel" one token.
TEST(Bpe, MergesFollowTheirRank) {
  auto impl = tiny({{"h", "e"}, {"e", "l"}, {"he", "l"}});
  EXPECT_EQ(scan(*impl, "hel"), (Ids{258}));
  EXPECT_EQ(heap(*impl, "hel"), (Ids{258}));
  EXPECT_EQ(scan(*impl, "he"), (Ids{256}));
}

// With "e l" at rank 0 and "h e" at rank 1, "hel" is [h] [el]: rank decides, not position.
TEST(Bpe, ALowerRankWinsOverAnEarlierPosition) {
  auto impl = tiny({{"e", "l"}, {"h", "e"}});
  EXPECT_EQ(scan(*impl, "hel"), (Ids{'h', 256}));
  EXPECT_EQ(heap(*impl, "hel"), (Ids{'h', 256}));
  // Swap the lines and the other pair wins.
  impl = tiny({{"h", "e"}, {"e", "l"}});
  EXPECT_EQ(scan(*impl, "hel"), (Ids{256, 'l'}));
  EXPECT_EQ(heap(*impl, "hel"), (Ids{256, 'l'}));
}

TEST(Bpe, EqualRanksMergeLeftmostFirst) {
  auto impl = tiny({{"a", "a"}});
  EXPECT_EQ(scan(*impl, "aaa"), (Ids{256, 'a'}));
  EXPECT_EQ(heap(*impl, "aaa"), (Ids{256, 'a'}));
  EXPECT_EQ(scan(*impl, "aaaaa"), (Ids{256, 256, 'a'}));
  EXPECT_EQ(heap(*impl, "aaaaa"), (Ids{256, 256, 'a'}));
}

TEST(Bpe, AnySplitOfATokenMergesAtItsRankAsInTiktoken) {
  // "abc" is made by the line "a bc", but tiktoken merges the parts "ab" + "c" too, since
  // their bytes form a token.
  auto impl = tiny({{"a", "b"}, {"b", "c"}, {"a", "bc"}});
  EXPECT_EQ(scan(*impl, "abc"), (Ids{258}));
  EXPECT_EQ(heap(*impl, "abc"), (Ids{258}));
}

TEST(Bpe, EncodeMatchesMergeRankOrder) {
  const Files files = tiny_files({{"b", "c"}, {"a", "b"}, {"x", "y"}});
  const Tokenizer tokenizer = Tokenizer::from_strings(files.vocab_json, files.merges_txt);
  EXPECT_EQ(tokenizer.encode("abc xy"), (Ids{'a', 256, ' ', 258}));
  EXPECT_EQ(tokenizer.decode(tokenizer.encode("abc xy")), "abc xy");
}

// GPT-2 ranks grow with ids for every merged token, so the id is a rank for the reference.
TEST(Bpe, FastStrategiesEqualTheReferenceOnGpt2) {
  auto impl = build_tokenizer(read_regular_file(KAEL_GPT2_TOKENIZER_DIR "/vocab.json", "vocab", kMaxTokenizerFileBytes), "vocab.json",
                              read_regular_file(KAEL_GPT2_TOKENIZER_DIR "/merges.txt", "merges", kMaxTokenizerFileBytes), "merges.txt");
  auto rank_of = [&](std::string_view bytes) -> std::optional<std::uint32_t> {
    const std::uint64_t* id = impl->mergeable.find(bytes);
    return id ? std::optional<std::uint32_t>(static_cast<std::uint32_t>(*id)) : std::nullopt;
  };
  const std::string alphabet[] = {"e", "t", "a", "o", "i", "n", "s", "r", "h", "l", " ", "th", "ing", "er",
                                  "\xc3\xa9", "\xe6\x97\xa5", "\xe3\x81\xae", "\xd0\xb0", "\xd1\x82", "\x80", "0"};
  std::mt19937 rng(3);
  for (int round = 0; round < 1500; ++round) {
    std::string piece;
    const std::size_t target = round < 1200 ? 2 + rng() % 40 : 100 + rng() % 300;
    while (piece.size() < target) piece += alphabet[rng() % std::size(alphabet)];
    Ids expected;
    for (const std::string& part : bpe_reference(piece, rank_of))
      expected.push_back(static_cast<std::int32_t>(*impl->mergeable.find(part)));
    ASSERT_EQ(heap(*impl, piece), expected) << piece;
    if (piece.size() <= kScanLimit) {
      ASSERT_EQ(scan(*impl, piece), expected) << piece;
    }
  }
}

}  // namespace
}  // namespace kael::text
