// GPT2::copy_session (a beam forking from another): a copied session decodes exactly as its
// source would, whatever the destination held before.
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

class SessionCopy : public ::testing::Test {
 protected:
  Config config = tiny_config();
  std::map<std::string, Tensor> tensors = tiny_checkpoint(config);
  GPT2 model = GPT2::from_tensors(config, share(tensors));
};

}  // namespace

TEST_F(SessionCopy, ForkDecodesLikeItsSource) {
  // Lengths on both sides of a 16-position panel and a 32-position block boundary, and a
  // destination that held more.
  for (std::size_t length : {1u, 15u, 16u, 17u, 31u, 32u, 33u, 40u, 70u}) {
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
