// GPT2::forward_all_logits: every position's logits in one pass equal forward() after each
// prefix, across a chunk boundary and after cached positions, and bad calls change nothing.
#include <gtest/gtest.h>

#include "kael/core/error.hpp"
#include "kael/model/gpt2.hpp"
#include "model_testing.hpp"

using namespace kael;
using namespace kael::model;
using namespace kael::model::testing;

namespace {

// Row t of (T, V) `all` against forward() on a session that holds `cached` then ids[0..t].
void expect_rows_equal_prefix_forward(const GPT2& model, const std::vector<std::int32_t>& cached,
                                      const std::vector<std::int32_t>& ids, const std::vector<float>& all) {
  const auto V = static_cast<std::size_t>(model.config().vocab_size);
  Session session = model.new_session();
  if (!cached.empty()) model.forward(session, cached);
  for (std::size_t t = 0; t < ids.size(); ++t) {
    const auto logits = model.forward(session, std::span(&ids[t], 1));
    for (std::size_t v = 0; v < V; ++v)
      ASSERT_NEAR(all[t * V + v], logits[v], 1e-4f * (1.0f + std::abs(logits[v]))) << "position " << t << " id " << v;
  }
}

class AllLogits : public ::testing::Test {
 protected:
  // More positions than one 256-row chunk, so the pass spans two chunks.
  Config config = [] {
    Config c = tiny_config();
    c.n_positions = 300;
    return c;
  }();
  std::map<std::string, Tensor> tensors = tiny_checkpoint(config);
  GPT2 model = GPT2::from_tensors(config, share(tensors));
  std::size_t V = static_cast<std::size_t>(config.vocab_size);
};

}  // namespace

TEST_F(AllLogits, EveryRowEqualsForwardAfterThatPrefixAcrossChunks) {
  const auto ids = some_ids(270, config.vocab_size);
  Session session = model.new_session();
  std::vector<float> all(ids.size() * V);
  model.forward_all_logits(session, ids, all);
  EXPECT_EQ(session.length(), 270);
  expect_rows_equal_prefix_forward(model, {}, ids, all);
}

TEST_F(AllLogits, ContinuesACachedSessionAndLeavesItsLogitsAsForwardWould) {
  const auto cached = some_ids(9, config.vocab_size), ids = some_ids(7, config.vocab_size - 1);
  Session session = model.new_session();
  model.forward(session, cached);
  std::vector<float> all(ids.size() * V);
  model.forward_all_logits(session, ids, all);
  expect_rows_equal_prefix_forward(model, cached, ids, all);

  // The next decode step continues from there, as after forward().
  Session reference = model.new_session();
  model.forward(reference, cached);
  model.forward(reference, ids);
  const std::int32_t next = 4;
  const auto a = model.forward(session, std::span(&next, 1));
  const auto b = model.forward(reference, std::span(&next, 1));
  for (std::size_t v = 0; v < V; ++v) EXPECT_NEAR(a[v], b[v], 1e-4f * (1.0f + std::abs(b[v])));
}

TEST_F(AllLogits, BadCallsThrowAndChangeNothing) {
  Session session = model.new_session();
  const auto ids = some_ids(5, config.vocab_size);
  std::vector<float> small(ids.size() * V - 1);
  EXPECT_THROW(model.forward_all_logits(session, ids, small), ValueError);
  std::vector<float> none;
  EXPECT_THROW(model.forward_all_logits(session, {}, none), ValueError);
  const std::vector<std::int32_t> bad = {1, config.vocab_size};
  std::vector<float> out(bad.size() * V);
  EXPECT_THROW(model.forward_all_logits(session, bad, out), IndexError);
  const auto too_long = some_ids(301, config.vocab_size);
  std::vector<float> big(too_long.size() * V);
  EXPECT_THROW(model.forward_all_logits(session, too_long, big), ValueError);
  EXPECT_EQ(session.length(), 0);
}
