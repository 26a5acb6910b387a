// Loading vocab.json and merges.txt: malformed files are ValueErrors naming the problem,
// missing ones are Errors; one hand-made bad input per check.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "kael/core/error.hpp"
#include "kael/text/tokenizer.hpp"
#include "text/byte_symbols.hpp"
#include "kael/core/file.hpp"
#include "text/vocab_files.hpp"

namespace kael::text {
namespace {

// The first `bytes` byte tokens (all 256 by default) plus "ab" (256), as JSON without the closing brace.
std::string vocab_prefix(int bytes = 256) {
  std::string json = "{";
  for (int b = 0; b < bytes; ++b)
    json += nlohmann::json(bytes_to_symbols(std::string(1, static_cast<char>(b)))).dump() + ":" + std::to_string(b) + ",";
  return json + "\"ab\":256";
}
const std::string kGoodVocab = vocab_prefix() + "}";
const std::string kGoodMerges = "#version: 0.2\na b\n";

// Expects a ValueError whose message contains `needle`.
template <class F>
void expect_value_error(F&& load, const std::string& needle) {
  try {
    load();
    ADD_FAILURE() << "no error; expected one mentioning " << needle;
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}
void bad_vocab(const std::string& vocab, const std::string& needle) {
  expect_value_error([&] { Tokenizer::from_strings(vocab, kGoodMerges); }, needle);
}
void bad_merges(const std::string& merges, const std::string& needle) {
  expect_value_error([&] { Tokenizer::from_strings(kGoodVocab, merges); }, needle);
}

TEST(VocabFiles, GoodFilesLoad) {
  const Tokenizer tokenizer = Tokenizer::from_strings(kGoodVocab, kGoodMerges);
  EXPECT_EQ(tokenizer.encode("abab"), (std::vector<std::int32_t>{256, 256}));
  EXPECT_EQ(tokenizer.vocabulary_size(), 257u);
  // CRLF line ends, no final newline, no #version line.
  EXPECT_NO_THROW(Tokenizer::from_strings(kGoodVocab, "#version: 0.2\r\na b\r\n"));
  EXPECT_NO_THROW(Tokenizer::from_strings(kGoodVocab, "a b"));
  // Gaps in the ids are allowed; the missing ids are unknown.
  const Tokenizer gappy = Tokenizer::from_strings(vocab_prefix() + ",\"zz\":300}", kGoodMerges);
  EXPECT_EQ(gappy.vocabulary_size(), 301u);
  EXPECT_THROW(gappy.token_bytes(280), IndexError);
  EXPECT_EQ(gappy.token_bytes(300), "zz");
  // Without <|endoftext|> in the vocabulary only the special option fails.
  EXPECT_THROW(tokenizer.encode("x", true), ValueError);
}

TEST(VocabFiles, CorruptVocabJson) {
  bad_vocab("", "invalid JSON");
  bad_vocab(vocab_prefix(), "invalid JSON");                 // truncated
  bad_vocab(kGoodVocab + "x", "invalid JSON");               // trailing garbage
  bad_vocab("[1, 2]", "expected a JSON object");
  bad_vocab("42", "expected a JSON object");
  bad_vocab(vocab_prefix() + ",\"cd\":-1}", "non-negative");
  bad_vocab(vocab_prefix() + ",\"cd\":1.5}", "1.5");
  bad_vocab(vocab_prefix() + ",\"cd\":\"7\"}", "non-negative integer id");
  bad_vocab(vocab_prefix() + ",\"cd\":null}", "null");
  bad_vocab(vocab_prefix() + ",\"cd\":{\"x\":1}}", "found an object");
  bad_vocab(vocab_prefix() + ",\"cd\":[1]}", "found an array");
  bad_vocab(vocab_prefix() + ",\"cd\":256}", "used by both");
  bad_vocab(vocab_prefix() + ",\"ab\":257}", "appears twice");
  bad_vocab(vocab_prefix() + ",\"a b\":257}", "not made of GPT-2 byte symbols");  // a raw space
  bad_vocab(vocab_prefix() + ",\"\\u4e16\":257}", "not made of GPT-2 byte symbols");
  bad_vocab(vocab_prefix() + ",\"\":257}", "empty string");
  bad_vocab(vocab_prefix() + ",\"cd\":99999999999}", "above the limit");
  bad_vocab(vocab_prefix() + ",\"cd\":\"\xff\"}", "invalid JSON");  // not UTF-8
  // Deep nesting is refused at the first level, without recursion.
  bad_vocab(std::string(100000, '[') + std::string(100000, ']'), "expected a JSON object");
  bad_vocab("{\"x\":" + std::string(100000, '{'), "found an object");
}

// The book's tokenizer refuses such text in encode; kael refuses, at load, a vocabulary that lacks
// a token for any byte, so every text is inside the vocabulary of a tokenizer that loaded.
TEST(VocabFiles, RejectsTextOutsideItsVocabulary) {
  bad_vocab("{\"a\":0}", "no token for the byte");
  bad_vocab(vocab_prefix(255) + "}", "no token for the byte 0xff");
}

TEST(VocabFiles, CorruptMergesTxt) {
  bad_merges("#version: 0.2\nab\n", "line 2: expected two symbols");
  bad_merges("#version: 0.2\na b c\n", "line 2: expected two symbols");
  bad_merges("#version: 0.2\na  b\n", "expected two symbols");
  bad_merges("#version: 0.2\n a\n", "expected two symbols");
  bad_merges("#version: 0.2\na \n", "expected two symbols");
  bad_merges("#version: 0.2\n\na b\n", "line 2: expected two symbols");  // a blank line
  bad_merges("#version: 0.2\na b\n\xff b\n", "line 3: ");
  bad_merges("#version: 0.2\na \xe4\xb8\x96\n", "not made of GPT-2 byte symbols");
  bad_merges("#version: 0.2\nb c\n", "the merged token 'bc' is not in");
  bad_merges("#version: 0.2\na b\nab ab\n", "the merged token 'abab' is not in");
}

TEST(VocabFiles, MissingFilesAreErrors) {
  EXPECT_THROW(read_regular_file("/nonexistent/vocab.json", "vocab file", 1 << 20), Error);
  try {
    Tokenizer::from_files("/nonexistent/vocab.json", "/nonexistent/merges.txt");
    FAIL();
  } catch (const ValueError&) {
    FAIL() << "a missing file is not a malformed one";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/vocab.json"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Tokenizer::from_directory("/nonexistent"), Error);
  EXPECT_THROW(read_regular_file("/", "vocab file", 1 << 20), Error);  // a directory is not a file
}

}  // namespace
}  // namespace kael::text
