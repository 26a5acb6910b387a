// Sequence without a model: hand-made logits pick each token, so the tests pin the ids, the
// streamed text, stop strings across tokens, <|endoftext|>, max_new_tokens, the context
// limit and truncation, and seeded reproducibility. Uses the real GPT-2 tokenizer files.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kael/core/error.hpp"
#include "kael/generate/sequence.hpp"
#include "kael/text/tokenizer.hpp"

using namespace kael;
using namespace kael::generate;

namespace {

constexpr int kVocab = 50257;

const text::Tokenizer& tokenizer() {
  static const text::Tokenizer tok = text::Tokenizer::from_directory(KAEL_GPT2_TOKENIZER_DIR);
  return tok;
}

// Logits that make `id` the clear favourite.
std::vector<float> favour(std::int32_t id) {
  std::vector<float> logits(kVocab, 0.0f);
  logits[static_cast<std::size_t>(id)] = 30.0f;
  return logits;
}

GenerateOptions greedy(int max_new_tokens) {
  GenerateOptions options;
  options.sampling.temperature = 0.0f;
  options.max_new_tokens = max_new_tokens;
  return options;
}

// Feeds `script` one token per step until the sequence finishes; returns the step texts.
std::vector<std::string> drive(Sequence& sequence, const std::vector<std::int32_t>& script) {
  std::vector<std::string> pieces;
  for (std::int32_t id : script) {
    if (sequence.finished()) break;
    const Step step = sequence.accept(favour(id));
    EXPECT_EQ(step.token, id);
    EXPECT_EQ(step.finished, sequence.finished());
    pieces.push_back(step.text);
  }
  return pieces;
}

// True when `s` is valid UTF-8 (in particular, does not end inside a character).
bool valid_utf8(const std::string& s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (std::size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    i += len;
  }
  return true;
}

const std::vector<std::int32_t> kHello{15496, 11};  // "Hello,"

}  // namespace

TEST(Sequence, PendingIsThePromptThenTheLastToken) {
  Sequence sequence(tokenizer(), kHello, greedy(3), 1024);
  EXPECT_EQ(std::vector<std::int32_t>(sequence.pending().begin(), sequence.pending().end()), kHello);
  sequence.accept(favour(995));
  EXPECT_EQ(std::vector<std::int32_t>(sequence.pending().begin(), sequence.pending().end()),
            (std::vector<std::int32_t>{995}));
}

TEST(Sequence, StreamsTextAndStopsAtMaxNewTokens) {
  Sequence sequence(tokenizer(), kHello, greedy(2), 1024);
  const auto pieces = drive(sequence, {995, 0, 0, 0});  // " world" "!"
  EXPECT_EQ(pieces, (std::vector<std::string>{" world", "!"}));
  EXPECT_EQ(sequence.ids(), (std::vector<std::int32_t>{995, 0}));
  EXPECT_EQ(sequence.text(), " world!");
  EXPECT_EQ(sequence.finish_reason(), "length");
  EXPECT_TRUE(sequence.pending().empty());
  EXPECT_THROW(sequence.accept(favour(0)), Error);
}

TEST(Sequence, EndOfTextEndsGenerationAndIsNotText) {
  Sequence sequence(tokenizer(), kHello, greedy(10), 1024);
  drive(sequence, {995, text::kEndOfText, 0});
  EXPECT_EQ(sequence.ids(), (std::vector<std::int32_t>{995, text::kEndOfText}));
  EXPECT_EQ(sequence.text(), " world");
  EXPECT_EQ(sequence.finish_reason(), "stop");
}

TEST(Sequence, IgnoreEosKeepsGoing) {
  GenerateOptions options = greedy(3);
  options.ignore_eos = true;
  Sequence sequence(tokenizer(), kHello, options, 1024);
  drive(sequence, {995, text::kEndOfText, 0});
  EXPECT_EQ(sequence.ids(), (std::vector<std::int32_t>{995, text::kEndOfText, 0}));
  EXPECT_EQ(sequence.text(), " world<|endoftext|>!");
  EXPECT_EQ(sequence.finish_reason(), "length");
}

TEST(Sequence, StopStringSpanningTokensIsNotLeaked) {
  // " world" "!" " Hello" ","  -- the stop string "! Hel" spans three tokens' text.
  GenerateOptions options = greedy(10);
  options.stop = {"! Hel"};
  Sequence sequence(tokenizer(), kHello, options, 1024);
  const auto pieces = drive(sequence, {995, 0, 18435, 11, 995});
  EXPECT_EQ(sequence.finish_reason(), "stop");
  EXPECT_EQ(sequence.ids(), (std::vector<std::int32_t>{995, 0, 18435}));
  EXPECT_EQ(sequence.text(), " world");
  std::string joined;
  for (const auto& piece : pieces) joined += piece;
  EXPECT_EQ(joined, " world");
  EXPECT_EQ(pieces[1], "");  // "!" was held back: it could begin the stop string
}

TEST(Sequence, HeldBackTextIsReleasedAtTheEnd) {
  GenerateOptions options = greedy(2);
  options.stop = {"! Hel"};
  Sequence sequence(tokenizer(), kHello, options, 1024);
  const auto pieces = drive(sequence, {995, 0});
  EXPECT_EQ(pieces, (std::vector<std::string>{" world", "!"}));  // max tokens reached: "!" flushed
  EXPECT_EQ(sequence.finish_reason(), "length");
}

TEST(Sequence, PiecesNeverSplitACharacter) {
  const auto ids = tokenizer().encode("日本語のテキスト");
  GenerateOptions options = greedy(static_cast<int>(ids.size()));
  Sequence sequence(tokenizer(), kHello, options, 1024);
  const auto pieces = drive(sequence, ids);
  bool held_some = false;
  for (const auto& piece : pieces) {
    EXPECT_TRUE(valid_utf8(piece)) << piece;
    held_some |= piece.empty();
  }
  EXPECT_TRUE(held_some) << "expected some token to end inside a character";
  EXPECT_EQ(sequence.text(), "日本語のテキスト");
}

TEST(Sequence, EmptyPromptIsAValueError) {
  EXPECT_THROW(Sequence(tokenizer(), std::vector<std::int32_t>{}, greedy(3), 1024), ValueError);
}

TEST(Sequence, ZeroNewTokensFinishesAtOnce) {
  Sequence sequence(tokenizer(), kHello, greedy(0), 1024);
  EXPECT_TRUE(sequence.finished());
  EXPECT_EQ(sequence.finish_reason(), "length");
  EXPECT_TRUE(sequence.pending().empty());
}

TEST(ContextLimit, PromptPlusMaxTokensPastTheContextIsAnErrorWithTheCounts) {
  const std::vector<std::int32_t> prompt(10, 15496);
  EXPECT_EQ(fit_prompt(prompt, 6, 16, false).size(), 10u);  // exactly fills the context
  try {
    fit_prompt(prompt, 7, 16, false);
    FAIL() << "expected a ValueError";
  } catch (const ValueError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("10 tokens"), std::string::npos) << message;
    EXPECT_NE(message.find("(7)"), std::string::npos) << message;
    EXPECT_NE(message.find("17 tokens"), std::string::npos) << message;
    EXPECT_NE(message.find("16 positions"), std::string::npos) << message;
  }
  EXPECT_THROW(Sequence(tokenizer(), prompt, greedy(7), 16), ValueError);
}

TEST(ContextLimit, TruncationKeepsTheEndOfThePrompt) {
  std::vector<std::int32_t> prompt;
  for (std::int32_t i = 0; i < 10; ++i) prompt.push_back(i);
  EXPECT_EQ(fit_prompt(prompt, 13, 16, true), (std::vector<std::int32_t>{7, 8, 9}));
  EXPECT_EQ(fit_prompt(prompt, 4, 16, true), prompt);  // fits: unchanged
  EXPECT_THROW(fit_prompt(prompt, 16, 16, true), ValueError);  // no room for any prompt
  GenerateOptions options = greedy(13);
  options.truncate_prompt = true;
  Sequence sequence(tokenizer(), prompt, options, 16);
  EXPECT_EQ(sequence.prompt_ids(), (std::vector<std::int32_t>{7, 8, 9}));
}

TEST(Sequence, RepetitionPenaltyCoversThePrompt) {
  // Id 11 (in the prompt) leads 5.0 to 4.0; a penalty of 2 halves it below id 995.
  GenerateOptions options = greedy(1);
  options.sampling.repetition_penalty = 2.0f;
  Sequence sequence(tokenizer(), kHello, options, 1024);
  std::vector<float> logits(kVocab, 0.0f);
  logits[11] = 5.0f;
  logits[995] = 4.0f;
  EXPECT_EQ(sequence.accept(logits).token, 995);
}

TEST(Sequence, SeedMakesSamplingReproducible) {
  auto sample = [](std::uint64_t seed) {
    GenerateOptions options;
    options.sampling.temperature = 1.0f;
    options.sampling.seed = seed;
    options.max_new_tokens = 40;
    options.ignore_eos = true;
    Sequence sequence(tokenizer(), kHello, options, 1024);
    std::vector<float> logits(kVocab, -10.0f);
    for (std::int32_t id = 1000; id < 1020; ++id) logits[static_cast<std::size_t>(id)] = 0.0f;
    while (!sequence.finished()) sequence.accept(logits);
    return sequence.ids();
  };
  EXPECT_EQ(sample(42), sample(42));
  EXPECT_NE(sample(42), sample(43));
}

TEST(Sequence, LogprobsComeFromTheModelDistribution) {
  GenerateOptions options = greedy(1);
  options.logprobs = true;
  options.top_logprobs = 2;
  options.sampling.repetition_penalty = 100.0f;  // changes the choice, not the reported logprobs
  Sequence sequence(tokenizer(), kHello, options, 1024);
  std::vector<float> logits(kVocab, -1e9f);
  logits[11] = std::log(0.75f);
  logits[995] = std::log(0.25f);
  const Step step = sequence.accept(logits);
  EXPECT_EQ(step.token, 995);
  EXPECT_NEAR(step.logprob, std::log(0.25), 1e-5);
  ASSERT_EQ(step.top_logprobs.size(), 2u);
  EXPECT_EQ(step.top_logprobs[0].id, 11);
  EXPECT_NEAR(step.top_logprobs[0].logprob, std::log(0.75), 1e-5);
}

TEST(Sequence, CancelReturnsHeldTextAndFinishes) {
  GenerateOptions options = greedy(10);
  options.stop = {"! Hel"};
  Sequence sequence(tokenizer(), kHello, options, 1024);
  drive(sequence, {995, 0});
  EXPECT_EQ(sequence.cancel(), "!");
  EXPECT_EQ(sequence.finish_reason(), "cancelled");
  EXPECT_EQ(sequence.text(), " world!");
}
