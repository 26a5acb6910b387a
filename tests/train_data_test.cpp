// Training data: finding documents, tokenizing in pieces, the token cache, the held-out split,
// and which windows each micro-batch reads.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <stdexcept>

#include "kael/core/error.hpp"
#include "kael/train/data.hpp"
#include "kernels/infra/thread_pool.hpp"
#include "train/data/text_pieces.hpp"
#include "train_testing.hpp"

namespace fs = std::filesystem;
using namespace kael;
using namespace kael::train;
using kael::train_testing::write_file;

namespace {

const text::Tokenizer& gpt2_tokenizer() {
  static const text::Tokenizer tokenizer = text::Tokenizer::from_directory(KAEL_GPT2_TOKENIZER_DIR);
  return tokenizer;
}

std::vector<fs::path> tokenizer_files() {
  return {KAEL_GPT2_TOKENIZER_DIR "/vocab.json", KAEL_GPT2_TOKENIZER_DIR "/merges.txt"};
}

// A scratch directory with a helper that writes a file into it.
class DataDir : public train_testing::TempDir {
 public:
  fs::path write(const std::string& name, const std::string& bytes) const { return write_file(path() / name, bytes); }
};

std::string read_corpus(const char* name) {
  const fs::path file = fs::path(KAEL_CORPUS_DIR) / name;
  if (!fs::is_regular_file(file))
    throw std::runtime_error("corpus file not found: " + file.string() + " (configure with -DKAEL_CORPUS_DIR=DIR)");
  return train_testing::read_file(file);
}

}  // namespace

TEST(TrainData, PiecesTokenizeLikeTheWholeText) {
  kernels::set_num_threads(2);
  for (const char* name : {"en_prose.txt", "code_python.txt", "man_ja.txt", "man_ru.txt"}) {
    const std::string text = read_corpus(name);
    const auto whole = gpt2_tokenizer().encode(text);
    // Small pieces make many cuts, each of which must leave the ids unchanged.
    const auto pieces = cut_text(text, 4096);
    ASSERT_GT(pieces.size(), 10u) << name;
    std::vector<std::int32_t> joined;
    for (const auto& ids : encode_pieces(gpt2_tokenizer(), pieces)) joined.insert(joined.end(), ids.begin(), ids.end());
    EXPECT_EQ(joined, whole) << name;
    EXPECT_EQ(encode_parallel(gpt2_tokenizer(), text), whole) << name;
  }
}

TEST(TrainData, CutsOnlyAfterANewlineBetweenPrintableCharacters) {
  const std::string text = "aaaa\n\nbbbb\n cccc\ndddd \neeee\nffff";
  for (const auto piece : cut_text(text, 2)) {
    if (piece.data() == text.data()) continue;
    const std::size_t at = static_cast<std::size_t>(piece.data() - text.data());
    EXPECT_EQ(text[at - 1], '\n');
    EXPECT_NE(text[at - 2], '\n');
    EXPECT_NE(text[at - 2], ' ');
    EXPECT_NE(text[at], ' ');
  }
  EXPECT_EQ(cut_text(text, 2).size(), 3u);  // before "eeee" and "ffff" only ("cccc": space after \n, "dddd": " \n")
}

TEST(TrainData, DirectoriesAreSearchedInSortedOrderByExtension) {
  DataDir dir;
  dir.write("b.txt", "bee");
  dir.write("a/z.md", "zed");
  dir.write("a/y.jsonl", "{\"text\": \"why\"}\n");
  dir.write("c.bin", "skipped");
  const fs::path inputs[] = {dir.path()};
  const auto files = list_data_files(inputs);
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0], dir.path() / "a/y.jsonl");
  EXPECT_EQ(files[1], dir.path() / "a/z.md");
  EXPECT_EQ(files[2], dir.path() / "b.txt");
}

TEST(TrainData, BadDataIsRefusedWithItsName) {
  DataDir dir;
  const fs::path missing[] = {dir.path() / "missing.txt"};
  EXPECT_THROW(list_data_files(missing), Error);
  const fs::path empty[] = {dir.write("empty.txt", "")};
  try {
    list_data_files(empty);
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("empty.txt' is empty"), std::string::npos) << e.what();
  }
  dir.write("sub/notes.bin", "x");
  const fs::path no_text[] = {dir.path() / "sub"};
  EXPECT_THROW(list_data_files(no_text), Error);

  EXPECT_THROW(read_documents(dir.write("bad.jsonl", "{\"text\": \"ok\"}\nnot json\n")), ValueError);
  EXPECT_THROW(read_documents(dir.write("notext.jsonl", "{\"body\": \"x\"}\n")), ValueError);
  EXPECT_THROW(read_documents(dir.write("number.jsonl", "{\"text\": 3}\n")), ValueError);
  const auto documents = read_documents(dir.write("ok.jsonl", "{\"text\": \"one\"}\n\n{\"text\": \"two\", \"id\": 2}\n"));
  EXPECT_EQ(documents, (std::vector<std::string>{"one", "two"}));
}

TEST(TrainData, EachDocumentEndsWithEndOfText) {
  DataDir dir;
  const fs::path files[] = {dir.write("a.txt", "Hello world"), dir.write("b.jsonl", "{\"text\": \"Hi\"}\n{\"text\": \"there\"}\n")};
  const auto stream = tokenize_files(files, gpt2_tokenizer(), tokenizer_files(), {});
  std::vector<std::int32_t> expected = gpt2_tokenizer().encode("Hello world");
  expected.push_back(text::kEndOfText);
  for (const char* text : {"Hi", "there"}) {
    for (auto id : gpt2_tokenizer().encode(text)) expected.push_back(id);
    expected.push_back(text::kEndOfText);
  }
  EXPECT_EQ(stream.tokens, expected);
  EXPECT_EQ(stream.documents, 3);
  EXPECT_FALSE(stream.from_cache);
}

TEST(TrainData, TheCacheIsReusedUntilAnInputChanges) {
  DataDir dir;
  const fs::path data = dir.write("a.txt", "Some text to tokenize once.");
  const fs::path files[] = {data};
  const fs::path cache = dir.path() / "cache";
  const auto first = tokenize_files(files, gpt2_tokenizer(), tokenizer_files(), cache);
  EXPECT_FALSE(first.from_cache);
  const auto second = tokenize_files(files, gpt2_tokenizer(), tokenizer_files(), cache);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.tokens, first.tokens);
  EXPECT_EQ(second.documents, first.documents);

  // A changed file (size and mtime) gets a new key; the old stream's file is removed.
  std::ofstream(data, std::ios::binary | std::ios::app) << " More.";
  const auto third = tokenize_files(files, gpt2_tokenizer(), tokenizer_files(), cache);
  EXPECT_FALSE(third.from_cache);
  EXPECT_GT(third.tokens.size(), first.tokens.size());
  EXPECT_EQ(std::distance(fs::directory_iterator(cache), fs::directory_iterator()), 1);

  // A damaged cache file is ignored and rewritten.
  const fs::path cached = fs::directory_iterator(cache)->path();
  fs::resize_file(cached, fs::file_size(cached) - 4);
  EXPECT_FALSE(tokenize_files(files, gpt2_tokenizer(), tokenizer_files(), cache).from_cache);
  EXPECT_TRUE(tokenize_files(files, gpt2_tokenizer(), tokenizer_files(), cache).from_cache);
  // A FIFO in its place is not waited on: ignored, then replaced by a cache file.
  fs::remove(cached);
  ASSERT_EQ(::mkfifo(cached.c_str(), 0600), 0);
  EXPECT_FALSE(tokenize_files(files, gpt2_tokenizer(), tokenizer_files(), cache).from_cache);
  EXPECT_TRUE(fs::is_regular_file(cached));
  EXPECT_TRUE(tokenize_files(files, gpt2_tokenizer(), tokenizer_files(), cache).from_cache);
}

TEST(TrainData, HeldOutIsTheLastFraction) {
  std::vector<std::int32_t> tokens(1000);
  std::iota(tokens.begin(), tokens.end(), 0);
  const auto split = split_train_val(tokens, 0.1);
  ASSERT_EQ(split.train.size(), 900u);
  ASSERT_EQ(split.val.size(), 100u);
  EXPECT_EQ(split.val.front(), 900);
  EXPECT_EQ(split_train_val(tokens, 0.0).val.size(), 0u);
  EXPECT_THROW(split_train_val(tokens, 1.0), ValueError);
  EXPECT_THROW(split_train_val(tokens, -0.1), ValueError);
}

TEST(TrainData, SequentialOrderFollowsTheFormula) {
  std::vector<std::int32_t> tokens(101);  // T = 4: floor(100 / 4) = 25 windows
  std::iota(tokens.begin(), tokens.end(), 0);
  const int T = 4, B = 3, K = 2;
  WindowSampler sampler(tokens, T, B, K, Order::sequential, 7);
  ASSERT_EQ(sampler.windows(), 25);
  std::vector<std::int32_t> inputs(B * T), targets(B * T);
  for (std::int64_t s = 0; s < 12; ++s) {
    for (int k = 0; k < K; ++k) {
      sampler.fill(inputs, targets, s, k);
      for (int b = 0; b < B; ++b) {
        const std::int64_t w = ((s * K + k) * B + b) % 25;
        EXPECT_EQ(sampler.window(s, k, b), w);
        for (int t = 0; t < T; ++t) {
          EXPECT_EQ(inputs[b * T + t], w * T + t);
          EXPECT_EQ(targets[b * T + t], w * T + t + 1);
        }
      }
    }
  }
}

TEST(TrainData, ARankFillsItsRowsOfTheGlobalBatch) {
  std::vector<std::int32_t> tokens(201);
  std::iota(tokens.begin(), tokens.end(), 0);
  const int T = 4, B = 6;
  WindowSampler sampler(tokens, T, B, 1, Order::shuffled, 3);
  std::vector<std::int32_t> inputs(B * T), targets(B * T);
  sampler.fill(inputs, targets, 5, 0);
  std::vector<std::int32_t> part_inputs(2 * T), part_targets(2 * T);
  for (int first = 0; first < B; first += 2) {
    sampler.fill(part_inputs, part_targets, 5, 0, first);
    EXPECT_TRUE(std::equal(part_inputs.begin(), part_inputs.end(), inputs.begin() + first * T)) << first;
    EXPECT_TRUE(std::equal(part_targets.begin(), part_targets.end(), targets.begin() + first * T)) << first;
  }
  EXPECT_THROW(sampler.fill(part_inputs, part_targets, 5, 0, 5), ValueError) << "rows 5-6 of 6";
  EXPECT_THROW(sampler.fill(part_inputs, part_targets, 5, 0, -1), ValueError);
}

TEST(TrainData, ShuffledOrderIsASeededPermutationPerEpoch) {
  std::vector<std::int32_t> tokens(201);
  const int T = 4;  // 50 windows
  WindowSampler sampler(tokens, T, 5, 1, Order::shuffled, 3);
  for (std::int64_t epoch = 0; epoch < 3; ++epoch) {
    std::set<std::int64_t> seen;
    std::vector<std::int64_t> order;
    for (std::int64_t s = epoch * 10; s < epoch * 10 + 10; ++s)
      for (int b = 0; b < 5; ++b) order.push_back(sampler.window(s, 0, b));
    seen.insert(order.begin(), order.end());
    EXPECT_EQ(seen.size(), 50u) << "epoch " << epoch << " reads every window once";
    EXPECT_EQ(order, epoch_permutation(50, 3, epoch));
    EXPECT_EQ(sampler.epoch(epoch * 10, 0), epoch);
  }
  EXPECT_NE(epoch_permutation(50, 3, 0), epoch_permutation(50, 3, 1));
  EXPECT_NE(epoch_permutation(50, 3, 0), epoch_permutation(50, 4, 0));
  auto identity = epoch_permutation(50, 3, 0);
  std::sort(identity.begin(), identity.end());
  EXPECT_EQ(identity.front(), 0);
  EXPECT_EQ(identity.back(), 49);
}

TEST(TrainData, TextShorterThanOneWindowIsRefused) {
  std::vector<std::int32_t> tokens(8);
  EXPECT_EQ(window_count(8, 8), 0);
  EXPECT_EQ(window_count(9, 8), 1);
  try {
    WindowSampler(tokens, 8, 1, 1, Order::sequential, 0);
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("shorter than one window"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_order("random"), ValueError);
}
