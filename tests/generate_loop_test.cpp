// generate() on a tiny in-memory model: cached greedy decoding equals argmax over a naive
// full-sequence forward at every step, text streams to the callback and the callback can stop
// it, timings are counted, and the context limit holds through the loop.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kael/core/error.hpp"
#include "kael/generate/generator.hpp"
#include "model_testing.hpp"

using namespace kael;
using namespace kael::generate;
namespace testing_model = kael::model::testing;

namespace {

const text::Tokenizer& tokenizer() {
  static const text::Tokenizer tok = text::Tokenizer::from_directory(KAEL_GPT2_TOKENIZER_DIR);
  return tok;
}

struct Tiny {
  model::Config config = testing_model::tiny_config();
  std::map<std::string, Tensor> tensors = testing_model::tiny_checkpoint(config, 7);
  model::GPT2 model = model::GPT2::from_tensors(config, testing_model::share(tensors), "tiny");
};

Tiny& tiny() {
  static Tiny t;
  return t;
}

GenerateOptions greedy(int n) {
  GenerateOptions options;
  options.sampling.temperature = 0.0f;
  options.max_new_tokens = n;
  return options;
}

const std::vector<std::int32_t> kPrompt{5, 17, 3, 30};

}  // namespace

TEST(Generate, GreedyEqualsArgmaxOfTheNaiveForwardAtEveryStep) {
  const auto result = generate::generate(tiny().model, tokenizer(), kPrompt, greedy(24));
  ASSERT_EQ(result.ids.size(), 24u);
  EXPECT_EQ(result.finish_reason, "length");
  std::vector<std::int32_t> sequence = kPrompt;
  for (std::size_t step = 0; step < result.ids.size(); ++step) {
    const auto logits = testing_model::naive_last_logits(tiny().config, tiny().tensors, sequence);
    std::vector<double> sorted = logits;
    std::sort(sorted.rbegin(), sorted.rend());
    const auto best = static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (sorted[0] - sorted[1] > 1e-4) {
      ASSERT_EQ(result.ids[step], best) << "step " << step;
    } else {  // a near-tie may go either way in float32
      ASSERT_GE(logits[static_cast<std::size_t>(result.ids[step])], sorted[1] - 1e-4) << "step " << step;
    }
    sequence.push_back(result.ids[step]);
  }
}

TEST(Generate, StreamsEveryPieceAndCountsTimings) {
  std::string streamed;
  int calls = 0;
  const auto result = generate::generate(tiny().model, tokenizer(), kPrompt, greedy(10), [&](std::string_view piece) {
    streamed += piece;
    ++calls;
    return true;
  });
  EXPECT_EQ(streamed, result.text);
  EXPECT_EQ(result.text, tokenizer().decode(result.ids));  // ids < 37 are single ASCII characters
  EXPECT_GT(calls, 0);
  EXPECT_EQ(result.prompt_ids, kPrompt);
  EXPECT_EQ(result.timings.prompt_tokens, 4);
  EXPECT_EQ(result.timings.decode_steps, 9);
  EXPECT_GE(result.timings.prefill_ms, 0.0);
}

TEST(Generate, CallbackReturningFalseStops) {
  int calls = 0;
  const auto result = generate::generate(tiny().model, tokenizer(), kPrompt, greedy(10), [&](std::string_view) {
    ++calls;
    return false;
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(result.ids.size(), 1u);
  EXPECT_EQ(result.finish_reason, "cancelled");
}

TEST(Generate, ContextLimitAndTruncation) {
  const std::vector<std::int32_t> prompt(78, 9);  // 78 + 3 > 80 positions
  EXPECT_THROW(generate::generate(tiny().model, tokenizer(), prompt, greedy(3)), ValueError);
  GenerateOptions options = greedy(3);
  options.truncate_prompt = true;
  const auto result = generate::generate(tiny().model, tokenizer(), prompt, options);
  EXPECT_EQ(result.prompt_ids.size(), 77u);
  EXPECT_EQ(result.ids.size(), 3u);
  EXPECT_THROW(generate::generate(tiny().model, tokenizer(), std::vector<std::int32_t>{}, greedy(3)), ValueError);
}

TEST(Generate, SeededSamplingIsReproducible) {
  auto sample = [](std::uint64_t seed) {
    GenerateOptions options;
    options.sampling.temperature = 1.5f;
    options.sampling.seed = seed;
    options.max_new_tokens = 30;
    return generate::generate(tiny().model, tokenizer(), kPrompt, options).ids;
  };
  EXPECT_EQ(sample(3), sample(3));
  EXPECT_NE(sample(3), sample(4));
}
