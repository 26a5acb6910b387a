// The kael.hpp facade (kael::Model, kael::Session, kael::version) on a tiny seeded checkpoint
// written to disk with the real GPT-2 tokenizer files beside it: each call agrees with the
// layer it wraps, and bad options are errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "kael/io/safetensors.hpp"
#include "kael/kael.hpp"
#include "model_testing.hpp"

namespace fs = std::filesystem;
using namespace kael;

namespace {

// A model directory: the tiny checkpoint (37-token vocabulary, so ids are "!".."E"),
// its config.json and the GPT-2 vocab.json / merges.txt.
class Api : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / str("kael_api_test_", ::getpid());
    fs::create_directories(dir_);
    const model::Config c = model::testing::tiny_config();
    io::save_safetensors(dir_ / "model.safetensors", model::testing::tiny_checkpoint(c));
    std::ofstream(dir_ / "config.json") << "{\"n_layer\": " << c.n_layer << ", \"n_head\": " << c.n_head
                                        << ", \"n_embd\": " << c.n_embd << ", \"n_positions\": " << c.n_positions
                                        << ", \"vocab_size\": " << c.vocab_size << "}";
    for (const char* name : {"vocab.json", "merges.txt"})
      fs::copy_file(fs::path(KAEL_GPT2_TOKENIZER_DIR) / name, dir_ / name);
    model_ = new Model(Model::load(dir_, {.threads = 1}));
  }
  static void TearDownTestSuite() {
    delete model_;
    fs::remove_all(dir_);
  }
  static const Model& model() { return *model_; }
  static inline fs::path dir_;
  static inline Model* model_ = nullptr;
};

GenerateOptions greedy(int tokens) {
  GenerateOptions options;
  options.max_new_tokens = tokens;
  options.sampling.temperature = 0.0f;
  return options;
}

std::int32_t argmax(std::span<const float> logits) {
  return static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

}  // namespace

TEST(Version, IsTheProjectVersion) {
  EXPECT_STREQ(version(), KAEL_VERSION_STRING);
  // MAJOR.MINOR.PATCH and nothing else (parsed by hand: GCC 12 under ASan warns inside <regex>).
  int major = -1, minor = -1, patch = -1;
  ASSERT_EQ(std::sscanf(version(), "%d.%d.%d", &major, &minor, &patch), 3) << version();
  EXPECT_EQ(std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch), version());
}

TEST_F(Api, ConfigAndTokenizerAreTheCheckpoints) {
  EXPECT_EQ(model().config().vocab_size, 37);
  EXPECT_EQ(model().config().n_positions, 80);
  EXPECT_EQ(model().tokenize("Hello, world!"), (std::vector<std::int32_t>{15496, 11, 995, 0}));
  EXPECT_EQ(model().tokenize("<|endoftext|>", true), (std::vector<std::int32_t>{text::kEndOfText}));
  const std::vector<std::int32_t> ids{15496, 11, 995, 0};
  EXPECT_EQ(model().detokenize(ids), "Hello, world!");
}

TEST_F(Api, LogitsEqualTheModelAndLogitsAllHasEveryPosition) {
  const std::vector<std::int32_t> ids{3, 14, 15, 9, 2};
  auto session = model().gpt2().new_session();
  const auto direct = model().gpt2().forward(session, ids);
  const auto last = model().logits(ids);
  ASSERT_EQ(last.size(), 37u);
  for (std::size_t v = 0; v < last.size(); ++v) EXPECT_EQ(last[v], direct[v]);

  const auto all = model().logits_all(ids);  // (5, 37)
  ASSERT_EQ(all.size(), ids.size() * 37);
  for (std::size_t t = 0; t < ids.size(); ++t) {
    const auto prefix = model().logits(std::span(ids).first(t + 1));
    for (std::size_t v = 0; v < 37; ++v) EXPECT_NEAR(all[t * 37 + v], prefix[v], 1e-4f * (1 + std::abs(prefix[v])));
  }
}

TEST_F(Api, GreedyGenerationEqualsSteppingASession) {
  const std::vector<std::int32_t> prompt{5, 6, 7};
  const GenerateResult result = model().generate(prompt, greedy(12));
  ASSERT_EQ(result.ids.size(), 12u);
  EXPECT_EQ(result.prompt_ids, prompt);
  EXPECT_EQ(result.finish_reason, "length");

  Session session = model().session();
  EXPECT_EQ(session.capacity(), 80);
  std::vector<std::int32_t> stepped;
  auto logits = session.feed(prompt);
  while (stepped.size() < 12) {
    stepped.push_back(argmax(logits));
    logits = session.feed(stepped.back());
  }
  EXPECT_EQ(stepped, result.ids);
  EXPECT_EQ(session.length(), 3 + 12);
  session.reset();
  EXPECT_EQ(session.length(), 0);
}

TEST_F(Api, StreamedPiecesJoinToTheTextAndTheCallbackCanStop) {
  GenerateOptions options;
  options.max_new_tokens = 10;
  options.sampling.temperature = 0.9f;
  options.sampling.top_k = 20;
  options.sampling.seed = 7;
  const std::string prompt = "A!B";  // one-character tokens, inside the tiny vocabulary
  ASSERT_EQ(model().tokenize(prompt), (std::vector<std::int32_t>{32, 0, 33}));
  std::string streamed;
  const auto whole = model().generate(prompt, options, [&](std::string_view piece) {
    streamed += piece;
    return true;
  });
  EXPECT_EQ(streamed, whole.text);
  EXPECT_EQ(model().generate(prompt, options).ids, whole.ids);  // the seed reproduces

  int pieces = 0;
  const auto stopped = model().generate(prompt, options, [&](std::string_view) { return ++pieces < 2; });
  EXPECT_EQ(stopped.finish_reason, "cancelled");
  EXPECT_LT(stopped.ids.size(), 10u);
}

TEST_F(Api, ErrorsAreExceptions) {
  EXPECT_THROW(model().generate("", greedy(3)), ValueError);
  EXPECT_THROW(model().logits(std::vector<std::int32_t>{37}), IndexError);
  Session session = model().session();
  EXPECT_THROW(session.feed(std::vector<std::int32_t>(81, 1)), ValueError);
  EXPECT_EQ(session.length(), 0);
  try {
    Model::load(dir_, {.device = "cuda"});
    FAIL() << "cuda loaded";
  } catch (const Error& e) {
    // Without a usable GPU the cause is named; with one, the engine says it runs on the CPU only.
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(require_device("cpu"));
  EXPECT_THROW(Model::load(dir_, {.threads = -1}), ValueError);
  EXPECT_THROW(Model::load(dir_ / "missing"), Error);
}
