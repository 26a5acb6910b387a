// GPT2::copy_session (a beam forking from another) and GPT2::forward_every_position (prompt
// scoring): a copied session decodes exactly as its source would, and every position's logits
// equal those forward() gives for that prefix.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kael/core/error.hpp"
#include "kael/model/gpt2.hpp"
#include "model_testing.hpp"

using namespace kael;
using namespace kael::model;
using namespace kael::model::testing;

namespace {

std::vector<std::int32_t> some_ids(std::size_t n, std::int32_t vocab) {
  std::vector<std::int32_t> ids(n);
  for (std::size_t i = 0; i < n; ++i) ids[i] = static_cast<std::int32_t>((i * 29 + 7) % static_cast<std::size_t>(vocab));
  return ids;
}

class SessionCopy : public ::testing::Test {
 protected:
  Config config = tiny_config();
  std::map<std::string, Tensor> tensors = tiny_checkpoint(config);
  GPT2 model = GPT2::from_tensors(config, share(tensors));
};

}  // namespace

TEST_F(SessionCopy, ForkDecodesLikeItsSource) {
  // Lengths on both sides of a 16-position panel boundary, and a destination that held more.
  for (std::size_t length : {1u, 15u, 16u, 17u, 40u}) {
    const auto prompt = some_ids(length, config.vocab_size);
    Session source = model.new_session(), copy = model.new_session();
    model.forward(copy, some_ids(50, config.vocab_size));  // stale positions beyond the copy
    model.forward(source, prompt);
    model.copy_session(copy, source);
    ASSERT_EQ(copy.length(), source.length());
    for (std::int32_t token : {3, 9, 1}) {
      const std::vector<float> want = [&] {
        auto l = model.forward(source, std::span(&token, 1));
        return std::vector<float>(l.begin(), l.end());
      }();
      const auto got = model.forward(copy, std::span(&token, 1));
      ASSERT_TRUE(std::equal(got.begin(), got.end(), want.begin())) << "length " << length;
    }
  }
}

TEST_F(SessionCopy, RefusesAnotherModelsSession) {
  GPT2 other = GPT2::from_tensors(config, share(tensors));
  Session mine = model.new_session(), theirs = other.new_session();
  EXPECT_THROW(model.copy_session(mine, theirs), ValueError);
}

TEST_F(SessionCopy, EveryPositionMatchesForwardOfEachPrefix) {
  const auto ids = some_ids(70, config.vocab_size);  // past the 64-position chunk of the tiny model
  Session session = model.new_session();
  std::vector<std::vector<float>> rows;
  const auto last = model.forward_every_position(session, ids, [&](std::size_t i, std::span<const float> logits) {
    ASSERT_EQ(i, rows.size());
    rows.emplace_back(logits.begin(), logits.end());
  });
  ASSERT_EQ(rows.size(), ids.size());
  EXPECT_EQ(session.length(), static_cast<int>(ids.size()));
  EXPECT_TRUE(std::equal(last.begin(), last.end(), rows.back().begin()));
  for (std::size_t i : {0u, 1u, 33u, 63u, 64u, 69u}) {
    Session prefix = model.new_session();
    const auto want = model.forward(prefix, std::span(ids).first(i + 1));
    for (std::size_t v = 0; v < want.size(); ++v)
      ASSERT_NEAR(rows[i][v], want[v], 1e-4f * (1.0f + std::fabs(want[v]))) << "position " << i << " token " << v;
  }
}
