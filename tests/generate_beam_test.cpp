// The n-gram ban and logit_bias processors on hand-made histories, and beam search's option
// checks and invariants on a tiny model (the comparison with transformers is in
// tests/python/test_beam_search.py).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kael/core/error.hpp"
#include "kael/generate/beam_search.hpp"
#include "kael/generate/sampling.hpp"
#include "kael/model/gpt2.hpp"
#include "model_testing.hpp"

using namespace kael;
using namespace kael::generate;

namespace {
constexpr float kInf = std::numeric_limits<float>::infinity();
}  // namespace

TEST(NoRepeatNgram, BansWhatCompletesASeenNgram) {
  std::vector<float> logits(10, 0.0f);
  // History 1 2 3 1 2: the bigram prefix is (2); "2 3" was seen, so 3 is banned.
  const std::vector<std::int32_t> history = {1, 2, 3, 1, 2};
  apply_no_repeat_ngram(logits, history, 2);
  for (std::size_t t = 0; t < logits.size(); ++t) EXPECT_EQ(logits[t], t == 3 ? -kInf : 0.0f) << t;
  // Trigrams: prefix (1, 2) was followed by 3.
  std::fill(logits.begin(), logits.end(), 0.0f);
  apply_no_repeat_ngram(logits, history, 3);
  EXPECT_EQ(logits[3], -kInf);
  // Unigrams: every token seen is banned.
  std::fill(logits.begin(), logits.end(), 0.0f);
  apply_no_repeat_ngram(logits, history, 1);
  for (std::size_t t = 0; t < logits.size(); ++t) EXPECT_EQ(logits[t], (t >= 1 && t <= 3) ? -kInf : 0.0f) << t;
  // Too short a history or n = 0: nothing.
  std::fill(logits.begin(), logits.end(), 0.0f);
  apply_no_repeat_ngram(logits, history, 6);
  apply_no_repeat_ngram(logits, history, 0);
  for (float x : logits) EXPECT_EQ(x, 0.0f);
}

TEST(LogitBias, AddsAndChecksIds) {
  std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  apply_logit_bias(logits, {{0, 100.0f}, {2, -100.0f}});
  EXPECT_EQ(logits, (std::vector<float>{101.0f, 2.0f, -97.0f}));
  EXPECT_THROW(apply_logit_bias(logits, {{3, 1.0f}}), IndexError);
  SamplingParams params;
  params.logit_bias = {{5, 100.5f}};
  EXPECT_THROW(params.validate(), ValueError);
  params.logit_bias = {{50257, 1.0f}};
  EXPECT_THROW(params.validate(50257), IndexError);
  params.logit_bias = {{50256, -100.0f}};
  EXPECT_NO_THROW(params.validate(50257));
}

TEST(Sampler, LogitBiasForcesAndForbids) {
  std::vector<float> logits = {5.0f, 0.0f, 0.0f};
  SamplingParams params;
  params.temperature = 1.0f;
  params.seed = 3;
  params.logit_bias = {{0, -100.0f}, {2, 100.0f}};
  Sampler sampler(params);
  for (int i = 0; i < 20; ++i) {
    auto copy = logits;
    EXPECT_EQ(sampler.sample(copy), 2);
  }
}

TEST(BeamSearchOptions, InvalidValuesNameTheParameter) {
  auto fails = [](BeamSearchOptions o, const char* name) {
    try {
      o.validate(100);
      ADD_FAILURE() << "no error for " << name;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  };
  BeamSearchOptions o;
  o.num_beams = 0;
  fails(o, "num_beams");
  o = {};
  o.num_return_sequences = 5;
  fails(o, "num_return_sequences");
  o = {};
  o.length_penalty = std::nanf("");
  fails(o, "length_penalty");
  o = {};
  o.max_new_tokens = 0;
  fails(o, "max_new_tokens");
  o = {};
  o.logit_bias = {{100, 1.0f}};
  fails(o, "vocabulary");
  EXPECT_EQ(early_stopping_from_name("never"), EarlyStopping::never);
  EXPECT_EQ(early_stopping_from_name("true"), EarlyStopping::when_full);
  EXPECT_EQ(early_stopping_from_name("maybe"), std::nullopt);
}

TEST(BeamSearch, OneBeamIsGreedyAndScoresAreSortedSums) {
  const auto config = kael::model::testing::tiny_config();
  const auto tensors = kael::model::testing::tiny_checkpoint(config);
  const auto model = kael::model::GPT2::from_tensors(config, kael::model::testing::share(tensors));
  const std::vector<std::int32_t> prompt = {3, 1, 4, 1, 5};
  BeamSearchOptions options;
  options.max_new_tokens = 12;
  options.ignore_eos = true;  // the tiny vocabulary has no <|endoftext|>
  options.num_beams = 1;
  const auto one = beam_search(model, prompt, options);
  // Greedy by hand: argmax after each step.
  auto session = model.new_session();
  auto logits = model.forward(session, prompt);
  std::vector<std::int32_t> greedy;
  double sum = 0.0;
  for (int i = 0; i < options.max_new_tokens; ++i) {
    const std::int32_t t = argmax(logits);
    sum += logprob_of(logits, t);
    greedy.push_back(t);
    if (i + 1 < options.max_new_tokens) logits = model.forward(session, std::span(&t, 1));
  }
  ASSERT_EQ(one.sequences.size(), 1u);
  EXPECT_EQ(one.sequences[0].ids, greedy);
  EXPECT_NEAR(one.sequences[0].score, sum / options.max_new_tokens, 1e-4);
  EXPECT_EQ(one.sequences[0].finish_reason, "length");

  options.num_beams = 4;
  options.num_return_sequences = 4;
  options.length_penalty = 0.0f;  // the score is then the plain sum
  const auto four = beam_search(model, prompt, options);
  ASSERT_EQ(four.sequences.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    const auto& h = four.sequences[i];
    ASSERT_EQ(h.ids.size(), 12u);
    if (i > 0) {
      EXPECT_GE(four.sequences[i - 1].score, h.score);
    }
    // Rescore the hypothesis with forward(): the beams' caches were forked and reordered.
    auto s = model.new_session();
    auto l = model.forward(s, prompt);
    double total = 0.0;
    for (std::size_t k = 0; k < h.ids.size(); ++k) {
      total += logprob_of(l, h.ids[k]);
      if (k + 1 < h.ids.size()) l = model.forward(s, std::span(&h.ids[k], 1));
    }
    EXPECT_NEAR(h.score, total, 1e-3) << "hypothesis " << i;
  }
  EXPECT_GE(four.sequences[0].score, one.sequences[0].score * 12 - 1e-3);  // beams never do worse than greedy
}
