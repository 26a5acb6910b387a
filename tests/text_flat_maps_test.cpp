// The hash maps and the word cache: lookups after growth, overwrite, clear and eviction.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "text/flat_maps.hpp"
#include "text/word_cache.hpp"

namespace kael::text {
namespace {

// prefix + number (built by appending: GCC 12 warns falsely on "literal" + std::string).
std::string key(const char* prefix, std::size_t number) {
  std::string out = prefix;
  out += std::to_string(number);
  return out;
}

TEST(StringMap, FindsEveryKeyAfterGrowthAndClear) {
  StringMap map;
  for (int round = 0; round < 3; ++round) {
    for (std::uint64_t i = 0; i < 5000; ++i) map.insert(key("key", i), i * 3);
    EXPECT_EQ(map.size(), 5000u);
    for (std::uint64_t i = 0; i < 5000; ++i) {
      const std::uint64_t* value = map.find(key("key", i));
      ASSERT_NE(value, nullptr);
      EXPECT_EQ(*value, i * 3);
    }
    EXPECT_EQ(map.find("key5000"), nullptr);
    EXPECT_EQ(map.find(""), nullptr);
    map.insert("key7", 1);  // overwrite
    EXPECT_EQ(*map.find("key7"), 1u);
    EXPECT_EQ(map.size(), 5000u);
    map.clear();
    EXPECT_EQ(map.size(), 0u);
    EXPECT_EQ(map.find("key7"), nullptr);
  }
}

TEST(PairMap, KeepsTheLowestRank) {
  PairMap pairs;
  for (std::uint32_t i = 0; i < 10000; ++i) pairs.insert(i, i + 1, {i, i + 100});
  pairs.insert(5, 6, {2, 7});
  pairs.insert(5, 6, {9, 8});
  EXPECT_EQ(pairs.find(5, 6).rank, 2u);
  EXPECT_EQ(pairs.find(5, 6).id, 7u);
  EXPECT_EQ(pairs.find(9999, 10000).id, 10099u);
  EXPECT_EQ(pairs.find(6, 5).rank, PairMap::kNoRank);
  EXPECT_EQ(pairs.size(), 10000u);
}

TEST(WordCache, EvictsPastItsBoundAndStaysCorrect) {
  WordCache cache;
  const std::size_t words = WordCache::kMaxWords * 2 + 17;
  for (std::size_t i = 0; i < words; ++i) {
    const std::string word = key("w", i);
    const std::int32_t ids[] = {static_cast<std::int32_t>(i), 1, 2};
    cache.insert(word, hash_bytes(word), ids, 3);
  }
  std::vector<std::int32_t> out;
  const std::string last = key("w", words - 1);
  ASSERT_TRUE(cache.append(last, hash_bytes(last), out));
  EXPECT_EQ(out, (std::vector<std::int32_t>{static_cast<std::int32_t>(words - 1), 1, 2}));
  out.clear();
  EXPECT_FALSE(cache.append("w0", hash_bytes("w0"), out));  // evicted
  EXPECT_TRUE(out.empty());
  const std::string long_word(WordCache::kMaxWordBytes + 1, 'x');
  const std::int32_t id = 5;
  cache.insert(long_word, hash_bytes(long_word), &id, 1);
  EXPECT_FALSE(cache.append(long_word, hash_bytes(long_word), out));
}

}  // namespace
}  // namespace kael::text
