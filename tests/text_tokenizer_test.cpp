// The tokenizer on the real GPT-2 files: the known ids (docs/behaviour.md, "Tokenizer"), round
// trips of any bytes, the special token, errors, the streaming decoder and pathological inputs.
// Equality with tiktoken on the corpus and on random text is in tests/python.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kael/core/error.hpp"
#include "kael/text/bpe.hpp"
#include "kael/text/split.hpp"
#include "kael/text/tokenizer.hpp"

namespace kael::text {
namespace {

using Ids = std::vector<std::int32_t>;

const Tokenizer& gpt2() {
  static const Tokenizer tokenizer = Tokenizer::from_directory(KAEL_GPT2_TOKENIZER_DIR);
  return tokenizer;
}

TEST(Tokenizer, KnownIds) {
  EXPECT_EQ(gpt2().encode("Hello, world!"), (Ids{15496, 11, 995, 0}));
  EXPECT_EQ(gpt2().encode("Hello, my name is"), (Ids{15496, 11, 616, 1438, 318}));
  EXPECT_EQ(gpt2().encode("tokenization"), (Ids{30001, 1634}));
  EXPECT_EQ(gpt2().encode(" world"), (Ids{995}));
  EXPECT_EQ(gpt2().encode("<|endoftext|>"), (Ids{27, 91, 437, 1659, 5239, 91, 29}));
  EXPECT_EQ(gpt2().encode(""), Ids{});
  EXPECT_EQ(gpt2().vocabulary_size(), 50257u);
}

TEST(Tokenizer, EndOfTextIsSpecialOnlyWhenAllowed) {
  EXPECT_EQ(gpt2().encode("<|endoftext|>", true), (Ids{50256}));
  EXPECT_EQ(gpt2().encode("a<|endoftext|>b<|endoftext|>", true), (Ids{64, 50256, 65, 50256}));
  EXPECT_EQ(gpt2().encode("<|endoftext|", true), gpt2().encode("<|endoftext|"));
  EXPECT_EQ(gpt2().decode(Ids{kEndOfText}), "<|endoftext|>");
}

TEST(Tokenizer, EveryByteValueRoundTrips) {
  for (int b = 0; b < 256; ++b) {
    const std::string text(1, static_cast<char>(b));
    const Ids ids = gpt2().encode(text);
    ASSERT_EQ(ids.size(), 1u) << b;
    EXPECT_EQ(gpt2().decode(ids), text) << b;
    EXPECT_EQ(gpt2().token_bytes(ids[0]), text) << b;
  }
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  EXPECT_EQ(gpt2().decode(gpt2().encode(all)), all);
}

// The public split, on the book's round-trip prompt.
TEST(Gpt2Split, SplitsTheBooksPromptIntoItsWords) {
  EXPECT_EQ(split_gpt2_words("Hello, my name is"),
            (std::vector<std::string_view>{"Hello", ",", " my", " name", " is"}));
  EXPECT_TRUE(split_gpt2_words("").empty());
}

TEST(Tokenizer, RoundTripsArbitraryBytes) {
  std::mt19937 rng(11);
  for (int round = 0; round < 3000; ++round) {
    std::string text(rng() % 64, '\0');
    // Mostly bytes that make broken UTF-8, with some ASCII and valid characters mixed in.
    for (char& c : text) c = static_cast<char>(rng() % 3 == 0 ? 'a' + rng() % 26 : rng() % 256);
    if (round % 3 == 0) text += "\u00e9\xe6\x97\U0001F600 \xf0\x9f";
    ASSERT_EQ(gpt2().decode(gpt2().encode(text)), text) << round;
  }
}

TEST(Tokenizer, RepeatedWordsGiveTheSameIdsAsTheFirstTime) {
  // The second encode of each text is served by the word cache.
  for (std::string_view text : {"antidisestablishmentarianism", " Pneumonoultramicroscopic", "日本語のテキスト"}) {
    const Ids first = gpt2().encode(text);
    EXPECT_EQ(gpt2().encode(text), first);
    EXPECT_EQ(gpt2().decode(first), text);
  }
}

TEST(Tokenizer, ManyDistinctWordsOutliveCacheEviction) {
  // More distinct multi-token words than the word cache holds, twice over: " qz" and the
  // number in base 26 as letters.
  std::string text;
  for (int i = 0; i < 150'000; ++i) {
    text += " qz";
    for (int n = i; n > 0; n /= 26) text += static_cast<char>('a' + n % 26);
  }
  const Ids first = gpt2().encode(text);
  EXPECT_EQ(gpt2().encode(text), first);
  EXPECT_EQ(gpt2().decode(first), text);
}

TEST(Tokenizer, ThreadsEncodingAtOnceGetTheSameIds) {
  std::string text;
  for (int i = 0; i < 2000; ++i) text += (i % 3 ? " qzx" : " 日本語テキスト") + std::to_string(i % 97);
  const Ids expected = gpt2().encode(text);
  std::vector<Ids> results(4);
  std::vector<std::thread> threads;
  for (Ids& result : results) threads.emplace_back([&] { result = gpt2().encode(text); });
  for (std::thread& thread : threads) thread.join();
  for (const Ids& result : results) EXPECT_EQ(result, expected);
}

TEST(Tokenizer, UnknownIdIsAnIndexError) {
  EXPECT_THROW(gpt2().decode(Ids{50257}), IndexError);
  EXPECT_THROW(gpt2().decode(Ids{-1}), IndexError);
  EXPECT_THROW(gpt2().token_bytes(1 << 30), IndexError);
  try {
    gpt2().decode(Ids{1, 99999});
    FAIL();
  } catch (const IndexError& e) {
    EXPECT_NE(std::string(e.what()).find("99999"), std::string::npos) << e.what();
  }
}

TEST(Tokenizer, MissingFilesAreErrorsNotValueErrors) {
  auto load_missing = [] { return Tokenizer::from_directory("/nonexistent/kael/gpt2"); };
  EXPECT_THROW(load_missing(), Error);
  try {
    load_missing();
  } catch (const ValueError&) {
    FAIL() << "a missing directory is not a malformed file";
  } catch (const Error&) {
  }
  EXPECT_THROW(Tokenizer::from_files(KAEL_GPT2_TOKENIZER_DIR "/vocab.json", "/nonexistent/merges.txt"), Error);
}

// The book's name and signatures: int64 ids, the same as the engine tokenizer's.
TEST(BpeTokenizer, TheBooksRoundTripInInt64Ids) {
  const BpeTokenizer tokenizer(KAEL_GPT2_TOKENIZER_DIR "/vocab.json", KAEL_GPT2_TOKENIZER_DIR "/merges.txt");
  const std::vector<std::int64_t> ids = tokenizer.encode("Hello, my name is");
  EXPECT_EQ(ids, (std::vector<std::int64_t>{15496, 11, 616, 1438, 318}));
  EXPECT_EQ(tokenizer.decode(ids), "Hello, my name is");
  EXPECT_EQ(tokenizer.encode("tokenization"), (std::vector<std::int64_t>{30001, 1634}));
  EXPECT_EQ(tokenizer.encode("<|endoftext|>").size(), 7u);  // ordinary text, as encode_ordinary
  EXPECT_TRUE(tokenizer.encode("").empty());
  EXPECT_EQ(tokenizer.vocabulary_size(), 50257u);
  EXPECT_EQ(tokenizer.decode(std::vector<std::int64_t>{50256}), "<|endoftext|>");
  // Past int32 an id must not wrap into a valid one.
  for (const std::int64_t bad : {std::int64_t{50257}, std::int64_t{-1}, (std::int64_t{1} << 32) + 11})
    EXPECT_THROW((void)tokenizer.decode(std::vector<std::int64_t>{bad}), IndexError) << bad;
  EXPECT_THROW(BpeTokenizer("/nonexistent/vocab.json", KAEL_GPT2_TOKENIZER_DIR "/merges.txt"), Error);
}

TEST(BpeTokenizer, ByteSymbolsAreGpt2sPrintableSpelling) {
  const auto& symbols = BpeTokenizer::byte_symbols();
  EXPECT_EQ(symbols[0x00], "\u0100");  // the first unprintable byte, U+0100
  EXPECT_EQ(symbols[0x0A], "\u010A");  // newline
  EXPECT_EQ(symbols[0x20], "\u0120");  // space
  EXPECT_EQ(symbols[0x21], "!");
  EXPECT_EQ(symbols[0xAD], "\u0143");  // soft hyphen, the last of the 68
  EXPECT_EQ(symbols[0xFF], "\u00FF");
}

TEST(StreamDecoder, NeverEmitsHalfACharacterAndFlushesTheRest) {
  const std::string text = "Grüße, 世界! 🙂👍🏽 x";
  const Ids ids = gpt2().encode(text);
  StreamDecoder stream(gpt2());
  std::string joined;
  for (const std::int32_t id : ids) {
    const std::string piece = stream.push(id);
    // Each piece is whole characters: decoding it alone must not end inside one.
    if (!piece.empty()) {
      const auto last = static_cast<unsigned char>(piece.back());
      EXPECT_TRUE(last < 0x80 || (last & 0xC0) == 0x80) << "piece ends on a lead byte";
    }
    joined += piece;
  }
  joined += stream.flush();
  EXPECT_EQ(joined, text);
  EXPECT_EQ(stream.flush(), "");
}

TEST(StreamDecoder, HoldsAnIncompleteTailAndGivesBackInvalidBytesExactly) {
  // "日" is three bytes; feed them as single-byte tokens.
  const std::string ri = "\xe6\x97\xa5";
  StreamDecoder stream(gpt2());
  EXPECT_EQ(stream.push(gpt2().encode(ri.substr(0, 1))[0]), "");
  EXPECT_EQ(stream.push(gpt2().encode(ri.substr(1, 1))[0]), "");
  EXPECT_EQ(stream.push(gpt2().encode(ri.substr(2, 1))[0]), ri);
  // Bytes that can never complete a character go out at once; an unfinished tail at the end
  // comes out of flush as it is.
  EXPECT_EQ(stream.push(gpt2().encode("\xff")[0]), "\xff");
  EXPECT_EQ(stream.push(gpt2().encode("\xe6")[0]), "");
  EXPECT_EQ(stream.push(gpt2().encode("!")[0]), "\xe6!");
  EXPECT_EQ(stream.push(gpt2().encode("\xf0")[0]), "");
  EXPECT_EQ(stream.flush(), "\xf0");
  EXPECT_THROW(stream.push(-5), IndexError);
}

TEST(StreamDecoder, RandomBytesComeBackExactly) {
  std::mt19937 rng(5);
  for (int round = 0; round < 500; ++round) {
    std::string text(rng() % 40, '\0');
    for (char& c : text) c = static_cast<char>(rng() % 4 == 0 ? 0xE6 + rng() % 3 : rng() % 256);
    StreamDecoder stream(gpt2());
    std::string joined;
    for (const std::int32_t id : gpt2().encode(text)) joined += stream.push(id);
    joined += stream.flush();
    ASSERT_EQ(joined, text);
  }
}

// Inputs that make naive BPE quadratic. Each must finish well within the time limit.
TEST(Tokenizer, PathologicalInputs) {
  const auto start = std::chrono::steady_clock::now();
  // tiktoken's ids: "xxxxxxxx" is one token, as is "!!!!!!!!"; GPT-2 has no token of two spaces.
  EXPECT_EQ(gpt2().encode(std::string(1'000'000, 'x')), Ids(125'000, 24223));
  EXPECT_EQ(gpt2().encode(std::string(300'000, '!')), Ids(37'500, 34635));
  EXPECT_EQ(gpt2().encode(std::string(100'000, ' ')), Ids(100'000, 220));
  for (const std::string& text : {std::string(1'000'000, 'x'), std::string(1'000'000, ' '),
                                  std::string(200'000, '\n') + "x", std::string(300'000, '!')}) {
    const Ids ids = gpt2().encode(text);
    EXPECT_LE(ids.size(), text.size());
    EXPECT_EQ(gpt2().decode(ids), text);
  }
  std::string word;  // one long word of varied letters
  for (int i = 0; i < 200'000; ++i) word += static_cast<char>('a' + (i * 7 + i / 13) % 26);
  EXPECT_EQ(gpt2().decode(gpt2().encode(word)), word);
  std::string cjk;
  for (int i = 0; i < 100'000; ++i) cjk += (i % 2 ? "語" : "の");
  EXPECT_EQ(gpt2().decode(gpt2().encode(cjk)), cjk);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

}  // namespace
}  // namespace kael::text
