// GPT2::forward_batch (several sequences, one new token each, at their own positions, in one
// pass): equal to each session's own forward(), for sessions of different lengths, across
// the prefill chunk boundary (kChunk) and with any thread count; and the calls it refuses.
#include <gtest/gtest.h>

#include <vector>

#include "kael/core/error.hpp"
#include "kael/model/gpt2.hpp"
#include "model_testing.hpp"

using namespace kael;
using namespace kael::model;
using namespace kael::model::testing;

namespace {

class Batch : public TinyModel {};
class BatchChunks : public ChunkModel {};

}  // namespace

TEST_F(BatchChunks, EqualsForwardOfEachSession) {
  const auto C = static_cast<std::size_t>(kChunk);
  for (int threads : {1, 3}) {
    model::set_num_threads(threads);
    // Prompts of different lengths (two of them past a prefill chunk: the first decode step
    // of the one of kChunk - 1 tokens crosses it), so every session decodes at its own
    // position; the reference sessions get the same tokens through forward().
    const std::vector<std::size_t> lengths = {1, 5, C - 1, 12, C + 6};
    std::vector<Session> batched, alone;
    std::vector<std::int32_t> next;
    for (std::size_t i = 0; i < lengths.size(); ++i) {
      const auto prompt = some_ids(lengths[i], config.vocab_size, i);
      batched.push_back(model.new_session());
      alone.push_back(model.new_session());
      model.forward(batched.back(), prompt);
      const auto logits = model.forward(alone.back(), prompt);
      next.push_back(static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    }
    std::vector<Session*> pointers;
    for (auto& s : batched) pointers.push_back(&s);
    for (int step = 0; step < 8; ++step) {
      const auto got = model.forward_batch(pointers, next);
      ASSERT_EQ(got.size(), lengths.size());
      for (std::size_t i = 0; i < lengths.size(); ++i) {
        const auto expected = model.forward(alone[i], std::span(&next[i], 1));
        ASSERT_EQ(got[i].size(), expected.size());
        // The same kernels on the same rows: equal bit for bit, not just close.
        ASSERT_TRUE(std::equal(got[i].begin(), got[i].end(), expected.begin()))
            << "session " << i << " step " << step << " threads " << threads;
        ASSERT_EQ(batched[i].length(), alone[i].length());
      }
      for (std::size_t i = 0; i < lengths.size(); ++i)
        next[i] = static_cast<std::int32_t>(std::max_element(got[i].begin(), got[i].end()) - got[i].begin());
    }
  }
  model::set_num_threads(0);
}

TEST_F(Batch, LogitsStayValidUntilThatSessionsNextCall) {
  Session a = model.new_session(), b = model.new_session();
  model.forward(a, some_ids(3, config.vocab_size, 0));
  model.forward(b, some_ids(4, config.vocab_size, 1));
  Session* pair[] = {&a, &b};
  const std::int32_t tokens[] = {1, 2};
  const auto first = model.forward_batch(pair, tokens);
  const std::vector<float> a_logits(first[0].begin(), first[0].end());
  Session* only_b[] = {&b};
  const std::int32_t token_b[] = {3};
  model.forward_batch(only_b, token_b);  // b moves on; a's logits are untouched
  EXPECT_TRUE(std::equal(a_logits.begin(), a_logits.end(), first[0].begin()));
}

TEST_F(Batch, BadCallsAreRefused) {
  Session a = model.new_session(), b = model.new_session();
  model.forward(a, some_ids(3, config.vocab_size, 0));
  Session* pair[] = {&a, &b};
  Session* twice[] = {&a, &a};
  const std::int32_t two[] = {1, 2}, one[] = {1}, bad[] = {1, 37};
  EXPECT_THROW(model.forward_batch(pair, one), ValueError);              // sizes differ
  EXPECT_THROW(model.forward_batch({}, std::span<const std::int32_t>{}), ValueError);  // empty batch
  EXPECT_THROW(model.forward_batch(twice, two), ValueError);             // one session twice
  EXPECT_THROW(model.forward_batch(pair, bad), IndexError);              // id past the vocabulary
  EXPECT_EQ(a.length(), 3);  // nothing ran
  EXPECT_EQ(b.length(), 0);

  GPT2 other = GPT2::from_tensors(config, share(tensors));
  Session foreign = other.new_session();
  Session* mixed[] = {&a, &foreign};
  EXPECT_THROW(model.forward_batch(mixed, two), ValueError);  // a session of another model

  Session full = model.new_session();
  model.forward(full, some_ids(static_cast<std::size_t>(config.n_positions), config.vocab_size, 2));
  Session* with_full[] = {&a, &full};
  try {
    model.forward_batch(with_full, two);
    FAIL() << "a session at the context end was accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(config.n_positions)), std::string::npos) << e.what();
  }
  EXPECT_EQ(a.length(), 3);
}

TEST_F(Batch, ProfileAddsUpEachPart) {
  ForwardProfile profile;
  Session a = model.new_session(), b = model.new_session();
  a.set_profile(&profile);
  b.set_profile(&profile);
  model.forward(a, some_ids(20, config.vocab_size, 0));
  model.forward(b, some_ids(2, config.vocab_size, 1));
  Session* pair[] = {&a, &b};
  const std::int32_t two[] = {1, 2};
  model.forward_batch(pair, two);  // one shared profile: the step is counted once
  EXPECT_GT(profile.total_ms, 0.0);
  for (double part : {profile.attention_ms, profile.mlp_ms, profile.layer_norm_ms, profile.logits_ms})
    EXPECT_GE(part, 0.0);
  EXPECT_GE(profile.other_ms(), -1e-9);
  EXPECT_LE(profile.attention_ms + profile.mlp_ms + profile.layer_norm_ms + profile.logits_ms,
            profile.total_ms + 1e-9);
  a.set_profile(nullptr);
  const ForwardProfile before = profile;
  model.forward(a, some_ids(1, config.vocab_size, 2));
  EXPECT_EQ(profile.total_ms, before.total_ms);
}

TEST_F(BatchChunks, LongPromptAcrossChunksMatchesNaiveAndStepwise) {
  // A context longer than one prefill chunk: one call over kChunk + 20 tokens must equal the
  // naive implementation and a session fed in uneven pieces.
  const auto ids = some_ids(static_cast<std::size_t>(kChunk) + 20, config.vocab_size, 3);
  Session whole = model.new_session();
  const auto logits = model.forward(whole, ids);
  const auto expected = naive_last_logits(config, tensors, ids);
  ASSERT_EQ(logits.size(), expected.size());
  for (std::size_t v = 0; v < expected.size(); ++v) EXPECT_NEAR(logits[v], expected[v], 1e-4) << "logit " << v;

  Session pieces = model.new_session();
  std::span<const std::int32_t> rest(ids);
  std::span<const float> last;
  for (std::size_t piece : {std::size_t(kChunk) - 1, std::size_t{2}, std::size_t{15}, std::size_t{4}}) {
    last = model.forward(pieces, rest.first(piece));
    rest = rest.subspan(piece);
  }
  for (std::size_t v = 0; v < expected.size(); ++v) ASSERT_NEAR(last[v], logits[v], 1e-5) << "logit " << v;
}
