// The forward pass (docs/behaviour.md, "The forward pass"): against a naive double-precision
// implementation, cached decoding against full recomputation, and the errors forward() raises.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <thread>

#include "kael/core/error.hpp"
#include "kael/model/gpt2.hpp"
#include "model_testing.hpp"

using namespace kael;
using namespace kael::model;
using namespace kael::model::testing;

namespace {

std::vector<float> run(const GPT2& model, const std::vector<std::int32_t>& ids) {
  Session session = model.new_session();
  const auto logits = model.forward(session, ids);
  EXPECT_EQ(session.length(), static_cast<int>(ids.size()));
  return {logits.begin(), logits.end()};
}

std::int32_t argmax(std::span<const float> logits) {
  return static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

class Forward : public TinyModel {};
class ForwardChunks : public ChunkModel {};

}  // namespace

TEST_F(ForwardChunks, MatchesNaiveImplementationAroundTheChunkAndUpToTheContextEnd) {
  const auto C = static_cast<std::size_t>(kChunk), P = static_cast<std::size_t>(config.n_positions);
  for (std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{5}, C - 1, C, C + 1, P}) {
    const auto ids = some_ids(n, config.vocab_size);
    const auto expected = naive_last_logits(config, tensors, ids);
    const auto got = run(model, ids);
    ASSERT_EQ(got.size(), expected.size());
    double worst = 0;
    for (std::size_t v = 0; v < got.size(); ++v) worst = std::max(worst, std::abs(got[v] - expected[v]));
    EXPECT_LT(worst, 1e-4) << "length " << n;
  }
}

TEST_F(Forward, CachedDecodingEqualsFullRecomputation) {
  // Prefill 10 positions, then one token a step; every step's logits must equal a fresh
  // session's over the whole sequence, and so must the greedy choices.
  std::vector<std::int32_t> ids = some_ids(10, config.vocab_size);
  Session session = model.new_session();
  auto logits = model.forward(session, ids);
  for (int step = 0; step < 70; ++step) {
    const auto full = run(model, ids);
    ASSERT_EQ(session.length(), static_cast<int>(ids.size()));
    double worst = 0;
    for (std::size_t v = 0; v < full.size(); ++v) worst = std::max(worst, double{std::abs(full[v] - logits[v])});
    ASSERT_LT(worst, 1e-5) << "step " << step;
    ASSERT_EQ(argmax(logits), argmax(full)) << "step " << step;
    ids.push_back(argmax(logits));
    logits = model.forward(session, std::span(&ids.back(), 1));
  }
  EXPECT_EQ(session.length(), 80);
}

TEST_F(Forward, ChunkedPrefillEqualsOneCall) {
  // Feeding a prompt in uneven pieces gives the same last logits as one call.
  const auto ids = some_ids(77, config.vocab_size);
  const auto expected = run(model, ids);
  Session session = model.new_session();
  std::span<const std::int32_t> rest(ids);
  std::span<const float> logits;
  for (std::size_t piece : {1, 30, 40, 6}) {
    logits = model.forward(session, rest.first(piece));
    rest = rest.subspan(piece);
  }
  for (std::size_t v = 0; v < expected.size(); ++v) ASSERT_NEAR(logits[v], expected[v], 1e-5);
}

TEST_F(Forward, ResultsDoNotDependOnThreadCount) {
  const auto ids = some_ids(70, config.vocab_size);
  model::set_num_threads(1);
  const auto one = run(model, ids);
  model::set_num_threads(3);
  const auto three = run(model, ids);
  model::set_num_threads(0);
  EXPECT_EQ(one, three);
}

TEST_F(Forward, ContextLimitIsAValueErrorWithCounts) {
  Session session = model.new_session();
  model.forward(session, some_ids(75, config.vocab_size));
  try {
    model.forward(session, some_ids(6, config.vocab_size));
    FAIL() << "no error past n_positions";
  } catch (const ValueError& e) {
    const std::string message = e.what();
    for (const char* fragment : {"81", "75 cached", "6 new", "n_positions = 80"})
      EXPECT_NE(message.find(fragment), std::string::npos) << message;
  }
  EXPECT_EQ(session.length(), 75);  // a refused call changes nothing
  model.forward(session, some_ids(5, config.vocab_size));  // exactly full is fine
  EXPECT_EQ(session.length(), 80);
  EXPECT_THROW(model.forward(session, some_ids(1, config.vocab_size)), ValueError);
  Session fresh = model.new_session();
  EXPECT_THROW(model.forward(fresh, some_ids(81, config.vocab_size)), ValueError);
}

TEST_F(Forward, BadCallsAreRefused) {
  Session session = model.new_session();
  EXPECT_THROW(model.forward(session, std::vector<std::int32_t>{}), ValueError);
  EXPECT_THROW(model.forward(session, std::vector<std::int32_t>{1, 37}), IndexError);
  EXPECT_THROW(model.forward(session, std::vector<std::int32_t>{-1}), IndexError);
  EXPECT_EQ(session.length(), 0);
  const GPT2 other = GPT2::from_tensors(config, share(tensors));
  EXPECT_THROW(other.forward(session, std::vector<std::int32_t>{1}), ValueError);
}

TEST_F(Forward, ResetAndIndependentSessions) {
  const auto a = some_ids(20, config.vocab_size), b = some_ids(9, 5);
  const auto expected_a = run(model, a), expected_b = run(model, b);
  Session first = model.new_session(), second = model.new_session();
  model.forward(first, a);
  const auto got_b = model.forward(second, b);  // interleaved with another session
  EXPECT_EQ(std::vector<float>(got_b.begin(), got_b.end()), expected_b);
  first.reset();
  EXPECT_EQ(first.length(), 0);
  const auto again = model.forward(first, a);
  EXPECT_EQ(std::vector<float>(again.begin(), again.end()), expected_a);
  // A moved model keeps serving its sessions.
  GPT2 moved = std::move(model);
  first.reset();
  const auto after_move = moved.forward(first, a);
  EXPECT_EQ(std::vector<float>(after_move.begin(), after_move.end()), expected_a);
}

TEST_F(Forward, SessionsRunConcurrently) {
  // Two threads, two sessions, one model: each gets what it gets alone.
  const auto a = some_ids(70, config.vocab_size), b = some_ids(33, 11);
  const auto expected_a = run(model, a), expected_b = run(model, b);
  std::vector<float> got_a, got_b;
  std::thread first([&] { got_a = run(model, a); });
  std::thread second([&] { got_b = run(model, b); });
  first.join();
  second.join();
  EXPECT_EQ(got_a, expected_a);
  EXPECT_EQ(got_b, expected_b);
}

TEST(ForwardShapes, OtherWidthsMatchNaiveImplementation) {
  // An explicit MLP width (config.json's n_inner), a single head, three layers.
  Config c = tiny_config();
  c.n_inner = 20;
  c.n_head = 1;
  c.n_layer = 3;
  const auto tensors = tiny_checkpoint(c, 7);
  const GPT2 model = GPT2::from_tensors(c, share(tensors));
  const auto ids = some_ids(30, c.vocab_size);
  const auto expected = naive_last_logits(c, tensors, ids);
  const auto got = run(model, ids);
  for (std::size_t v = 0; v < got.size(); ++v) ASSERT_NEAR(got[v], expected[v], 1e-4) << v;
}
