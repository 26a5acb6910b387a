// The samplers on hand-made logits: each processor with exact expected values, the order
// Sampler applies them in, greedy tie-breaking, and seeded reproducibility.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "kael/core/error.hpp"
#include "kael/generate/sampling.hpp"

using namespace kael;
using namespace kael::generate;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Ids whose logit is still finite (not filtered).
std::set<int> kept(const std::vector<float>& logits) {
  std::set<int> out;
  for (std::size_t i = 0; i < logits.size(); ++i)
    if (logits[i] != -kInf) out.insert(static_cast<int>(i));
  return out;
}

// Logits whose softmax is exactly `probs` up to rounding.
std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

}  // namespace

TEST(Rng, IsTheStandardMt19937_64WithA53BitConversion) {
  // The standard fixes mt19937_64's 10000th output for the default seed; ours must be it.
  std::mt19937_64 reference;
  reference.discard(9999);
  EXPECT_EQ(reference(), 9981545732273789042ull);
  Rng a(42), b(42), c(43);
  std::mt19937_64 engine(42);
  for (int i = 0; i < 1000; ++i) {
    const double u = a.uniform();
    EXPECT_EQ(u, static_cast<double>(engine() >> 11) / 9007199254740992.0);
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
    EXPECT_EQ(u, b.uniform());
  }
  Rng d(42);
  EXPECT_NE(c.uniform(), d.uniform());
}

TEST(RepetitionPenalty, DividesPositiveAndMultipliesNegativeLogits) {
  std::vector<float> logits{2.0f, -2.0f, 0.0f, 3.0f, -1.0f};
  apply_repetition_penalty(logits, {0, 1, 2}, 2.0f);
  EXPECT_EQ(logits, (std::vector<float>{1.0f, -4.0f, 0.0f, 3.0f, -1.0f}));
  apply_repetition_penalty(logits, {0, 1}, 1.0f);  // 1 turns it off
  EXPECT_EQ(logits, (std::vector<float>{1.0f, -4.0f, 0.0f, 3.0f, -1.0f}));
  EXPECT_THROW(apply_repetition_penalty(logits, {5}, 2.0f), IndexError);
}

TEST(PresenceFrequency, SubtractOncePlusPerOccurrence) {
  std::vector<float> logits{1.0f, 1.0f, 1.0f, 1.0f};
  apply_presence_frequency(logits, {{0, 1}, {1, 3}}, 0.5f, 0.25f);
  EXPECT_EQ(logits, (std::vector<float>{1.0f - 0.5f - 0.25f, 1.0f - 0.5f - 0.75f, 1.0f, 1.0f}));
  std::vector<float> negative{1.0f, 1.0f};
  apply_presence_frequency(negative, {{1, 2}}, -1.0f, 0.0f);  // a negative penalty encourages
  EXPECT_EQ(negative, (std::vector<float>{1.0f, 2.0f}));
}

TEST(Temperature, DividesEveryLogit) {
  std::vector<float> logits{2.0f, -1.0f, 0.5f};
  apply_temperature(logits, 0.5f);
  EXPECT_EQ(logits, (std::vector<float>{4.0f, -2.0f, 1.0f}));
  apply_temperature(logits, 2.0f);
  EXPECT_EQ(logits, (std::vector<float>{2.0f, -1.0f, 0.5f}));
  EXPECT_THROW(apply_temperature(logits, 0.0f), ValueError);
}

TEST(TopK, KeepsExactlyTheKHighest) {
  const std::vector<float> base{0.1f, 3.0f, -2.0f, 2.5f, 7.0f, 1.0f, 2.9f};
  for (int k = 1; k <= 7; ++k) {
    std::vector<float> logits = base;
    apply_top_k(logits, k);
    EXPECT_EQ(kept(logits).size(), static_cast<std::size_t>(k)) << "k=" << k;
  }
  std::vector<float> logits = base;
  apply_top_k(logits, 3);
  EXPECT_EQ(kept(logits), (std::set<int>{1, 4, 6}));
  EXPECT_EQ(logits[4], 7.0f);  // kept values are untouched
  std::vector<float> off = base;
  apply_top_k(off, 0);
  apply_top_k(off, 100);
  EXPECT_EQ(off, base);
}

TEST(TopK, KeepsTiesWithTheKthLikeHuggingFace) {
  std::vector<float> logits{1.0f, 2.0f, 2.0f, 0.0f};
  apply_top_k(logits, 2);
  EXPECT_EQ(kept(logits), (std::set<int>{1, 2}));
  std::vector<float> tied{1.0f, 2.0f, 1.0f, 0.0f};
  apply_top_k(tied, 2);
  EXPECT_EQ(kept(tied), (std::set<int>{0, 1, 2}));
}

TEST(TopP, KeepsTheSmallestSetReachingP) {
  // Probabilities 0.5, 0.25, 0.125, 0.0625, 0.0625 at shuffled ids.
  const std::vector<float> base = logits_of({0.125, 0.5, 0.0625, 0.25, 0.0625});
  auto nucleus = [&](float p) {
    std::vector<float> logits = base;
    apply_top_p(logits, p);
    return kept(logits);
  };
  EXPECT_EQ(nucleus(0.3f), (std::set<int>{1}));
  EXPECT_EQ(nucleus(0.55f), (std::set<int>{1, 3}));        // 0.5 < 0.55 so the 0.25 joins
  EXPECT_EQ(nucleus(0.7f), (std::set<int>{1, 3}));         // 0.75 >= 0.7
  EXPECT_EQ(nucleus(0.8f), (std::set<int>{0, 1, 3}));      // 0.875 >= 0.8
  EXPECT_EQ(nucleus(0.9f), (std::set<int>{0, 1, 2, 3}));  // 0.875 < 0.9: one 0.0625 (the lower id) joins
  EXPECT_EQ(nucleus(0.95f), (std::set<int>{0, 1, 2, 3, 4}));  // 0.9375 < 0.95: both
  EXPECT_EQ(nucleus(1.0f), (std::set<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(nucleus(1e-6f), (std::set<int>{1}));  // always at least one token
}

TEST(TopP, BreaksTiesByLowerIdAndSkipsFilteredTokens) {
  // 0.4 then three tied 0.2 with p = 0.5: the masses before are 0, 0.4, 0.6, so the 0.4 and
  // the lowest-id 0.2 stay.
  std::vector<float> logits = logits_of({0.2, 0.2, 0.4, 0.2});
  apply_top_p(logits, 0.5f);
  EXPECT_EQ(kept(logits), (std::set<int>{0, 2}));
  std::vector<float> filtered{0.0f, -kInf, 0.0f};
  apply_top_p(filtered, 0.4f);
  EXPECT_EQ(kept(filtered), (std::set<int>{0}));
}

TEST(TopP, LargeVocabularyMatchesAFullSort) {
  // More tokens than the first partial-sort chunk, and a nucleus that needs several chunks.
  std::vector<float> logits(5000);
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>((i * 7919) % 5000) * 1e-3f;
  std::vector<float> copy = logits;
  apply_top_p(copy, 0.9f);
  // Reference: sort everything, keep while the mass before each token is < 0.9.
  std::vector<std::size_t> order(logits.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  double total = 0.0;
  for (float x : logits) total += std::exp(static_cast<double>(x) - logits[order[0]]);
  std::set<int> expected;
  double before = 0.0;
  for (std::size_t i : order) {
    if (!expected.empty() && before >= 0.9 * total) break;
    expected.insert(static_cast<int>(i));
    before += std::exp(static_cast<double>(logits[i]) - logits[order[0]]);
  }
  EXPECT_GT(expected.size(), 300u);
  EXPECT_EQ(kept(copy), expected);
}

TEST(MinP, DropsTokensBelowTheScaledTopProbability) {
  // p = 0.5, 0.25, 0.125, 0.125: with min_p 0.3 the threshold is 0.15.
  const std::vector<float> base = logits_of({0.125, 0.5, 0.25, 0.125});
  std::vector<float> logits = base;
  apply_min_p(logits, 0.3f);
  EXPECT_EQ(kept(logits), (std::set<int>{1, 2}));
  logits = base;
  apply_min_p(logits, 0.2f);  // threshold 0.1: everything stays
  EXPECT_EQ(kept(logits).size(), 4u);
  logits = base;
  apply_min_p(logits, 1.0f);  // only the top token
  EXPECT_EQ(kept(logits), (std::set<int>{1}));
}

TEST(Argmax, FirstMaximumWinsLikeTorch) {
  EXPECT_EQ(argmax(std::vector<float>{1.0f, 3.0f, 3.0f, 2.0f}), 1);
  EXPECT_EQ(argmax(std::vector<float>{-kInf, -5.0f}), 1);
  EXPECT_THROW(argmax(std::vector<float>{}), ValueError);
}

TEST(SampleIndex, InverseCdfInIdOrder) {
  const std::vector<float> logits = logits_of({0.25, 0.5, 0.25});
  EXPECT_EQ(sample_index(logits, 0.0), 0);
  EXPECT_EQ(sample_index(logits, 0.2), 0);
  EXPECT_EQ(sample_index(logits, 0.3), 1);
  EXPECT_EQ(sample_index(logits, 0.7), 1);
  EXPECT_EQ(sample_index(logits, 0.8), 2);
  EXPECT_EQ(sample_index(logits, 0.999999), 2);
  const std::vector<float> filtered{-kInf, 1.0f, -kInf};
  EXPECT_EQ(sample_index(filtered, 0.0), 1);
  EXPECT_EQ(sample_index(filtered, 0.9999), 1);
  EXPECT_THROW(sample_index(std::vector<float>{-kInf, -kInf}, 0.5), ValueError);
}

TEST(Logprobs, MatchLogSoftmax) {
  const std::vector<float> logits = logits_of({0.125, 0.5, 0.25, 0.125});
  EXPECT_NEAR(logprob_of(logits, 1), std::log(0.5), 1e-6);
  const auto top = top_logprobs(logits, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].id, 1);
  EXPECT_EQ(top[1].id, 2);
  EXPECT_EQ(top[2].id, 0);  // tied with id 3; the lower id first
  EXPECT_NEAR(top[2].logprob, std::log(0.125), 1e-6);
  EXPECT_EQ(top_logprobs(logits, 10).size(), 4u);
  EXPECT_THROW(logprob_of(logits, 4), IndexError);
}

TEST(SamplingParams, RejectsOutOfRangeValues) {
  SamplingParams ok;
  EXPECT_NO_THROW(ok.validate());
  auto bad = [](auto change) {
    SamplingParams p;
    change(p);
    return p;
  };
  EXPECT_THROW(bad([](auto& p) { p.temperature = -0.1f; }).validate(), ValueError);
  EXPECT_THROW(bad([](auto& p) { p.temperature = std::nanf(""); }).validate(), ValueError);
  EXPECT_THROW(bad([](auto& p) { p.top_k = -1; }).validate(), ValueError);
  EXPECT_THROW(bad([](auto& p) { p.top_p = 0.0f; }).validate(), ValueError);
  EXPECT_THROW(bad([](auto& p) { p.top_p = 1.5f; }).validate(), ValueError);
  EXPECT_THROW(bad([](auto& p) { p.min_p = 1.5f; }).validate(), ValueError);
  EXPECT_THROW(bad([](auto& p) { p.repetition_penalty = 0.0f; }).validate(), ValueError);
  EXPECT_THROW(Sampler(bad([](auto& p) { p.top_p = -1.0f; })), ValueError);
}

TEST(Sampler, GreedyAppliesPenaltiesButNoWarpers) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.repetition_penalty = 4.0f;
  params.top_k = 1;  // ignored in greedy mode
  Sampler sampler(params);
  sampler.add_prompt(std::vector<std::int32_t>{0});
  std::vector<float> logits{4.0f, 3.0f, -1.0f};
  EXPECT_EQ(sampler.sample(logits), 1);  // 4 / 4 = 1 < 3
  EXPECT_EQ(logits[0], 1.0f);

  SamplingParams freq;
  freq.temperature = 0.0f;
  freq.frequency_penalty = 1.0f;
  Sampler counted(freq);
  counted.add_prompt(std::vector<std::int32_t>{1});  // the prompt does not count for frequency
  counted.add_generated(0);
  counted.add_generated(0);
  std::vector<float> second{3.5f, 3.0f};
  EXPECT_EQ(counted.sample(second), 1);  // 3.5 - 2 = 1.5 < 3.0
  EXPECT_EQ(second, (std::vector<float>{1.5f, 3.0f}));
}

TEST(Sampler, OrderIsPenaltyTemperatureTopKTopPMinP) {
  // Each case gives a different result in any other order; the kept logits show which ran.
  auto run = [](SamplingParams params, std::vector<float> logits, std::int32_t generated) {
    Sampler sampler(params);
    if (generated >= 0) sampler.add_generated(generated);
    sampler.sample(logits);
    return logits;
  };
  // Presence penalty before temperature: (2 - 1) / 0.5 = 2, not 2 / 0.5 - 1 = 3.
  SamplingParams presence;
  presence.temperature = 0.5f;
  presence.presence_penalty = 1.0f;
  EXPECT_EQ(run(presence, {2.0f, 1.0f}, 0), (std::vector<float>{2.0f, 2.0f}));
  // Top-k before top-p: p = 0.4, 0.35, 0.25; top-k 2 renormalizes to 0.53, 0.47, so top-p 0.5
  // keeps one token (top-p first would keep two).
  SamplingParams kp;
  kp.top_k = 2;
  kp.top_p = 0.5f;
  EXPECT_EQ(kept(run(kp, logits_of({0.4, 0.35, 0.25}), -1)), (std::set<int>{0}));
  // Temperature before min-p: at T = 0.5, p(1) / p(0) = e^-2 = 0.135 < 0.2 drops id 1
  // (at T = 1 the ratio e^-1 = 0.37 would keep it).
  SamplingParams tm;
  tm.temperature = 0.5f;
  tm.min_p = 0.2f;
  EXPECT_EQ(kept(run(tm, {0.0f, -1.0f}, -1)), (std::set<int>{0}));
  // Top-p before min-p: p = 0.5, 0.2, 0.1 x 3; top-p 0.69 keeps 0.5 and 0.2, which min-p 0.3
  // (threshold 0.15) leaves alone. Min-p first would drop the 0.1s, renormalize to 0.71, 0.29,
  // and top-p would then keep only id 0.
  SamplingParams pm;
  pm.top_p = 0.69f;
  pm.min_p = 0.3f;
  EXPECT_EQ(kept(run(pm, logits_of({0.5, 0.2, 0.1, 0.1, 0.1}), -1)), (std::set<int>{0, 1}));
}

TEST(Sampler, SameSeedSameDrawsDifferentSeedDiffers) {
  auto draws = [](std::uint64_t seed) {
    SamplingParams params;
    params.seed = seed;
    Sampler sampler(params);
    std::vector<std::int32_t> out;
    for (int i = 0; i < 64; ++i) {
      std::vector<float> logits(16, 0.0f);  // uniform over 16 tokens
      out.push_back(sampler.sample(logits));
    }
    return out;
  };
  EXPECT_EQ(draws(7), draws(7));
  EXPECT_NE(draws(7), draws(8));
  // Uniform logits and 64 draws: many different tokens come out.
  const auto d = draws(7);
  EXPECT_GT(std::set<std::int32_t>(d.begin(), d.end()).size(), 8u);
}

TEST(Sampler, FollowsTheDistribution) {
  // p = 0.75, 0.25: the frequency of id 0 over 20000 draws is 0.75 within 4 standard deviations.
  SamplingParams params;
  params.seed = 123;
  Sampler sampler(params);
  int zeros = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    std::vector<float> logits = logits_of({0.75, 0.25});
    zeros += sampler.sample(logits) == 0;
  }
  EXPECT_NEAR(static_cast<double>(zeros) / n, 0.75, 4 * std::sqrt(0.75 * 0.25 / n));
}
