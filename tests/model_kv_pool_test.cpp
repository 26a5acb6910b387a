// KvPool (gpt2.hpp): sessions take KV blocks as they grow and give them back; a full pool
// makes a forward call throw without changing anything, and sessions drawing from one shared
// pool compute exactly what sessions with pools of their own compute.
#include <gtest/gtest.h>

#include <vector>

#include "kael/core/error.hpp"
#include "kael/model/gpt2.hpp"
#include "model_testing.hpp"

using namespace kael;
using namespace kael::model;
using namespace kael::model::testing;

namespace {

class KvPoolTest : public ::testing::Test {
 protected:
  Config config = tiny_config();  // 80 positions: 3 blocks of 32
  std::map<std::string, Tensor> tensors = tiny_checkpoint(config);
  GPT2 model = GPT2::from_tensors(config, share(tensors));

  std::vector<float> logits(Session& s, const std::vector<std::int32_t>& ids) {
    const auto l = model.forward(s, ids);
    return {l.begin(), l.end()};
  }
};

}  // namespace

TEST_F(KvPoolTest, BlocksAreTakenAsTheSequenceGrowsAndGivenBack) {
  auto pool = model.new_kv_pool(5);
  ASSERT_EQ(pool->block_positions(), 32);
  EXPECT_EQ(pool->total_blocks(), 5);
  EXPECT_EQ(pool->blocks_for(0), 0);
  EXPECT_EQ(pool->blocks_for(32), 1);
  EXPECT_EQ(pool->blocks_for(33), 2);
  {
    Session s = model.new_session(pool);
    EXPECT_EQ(pool->used_blocks(), 0);  // nothing until positions need it
    model.forward(s, some_ids(31, config.vocab_size));
    EXPECT_EQ(pool->used_blocks(), 1);
    model.forward(s, some_ids(1, config.vocab_size));
    EXPECT_EQ(pool->used_blocks(), 1);  // 32 positions: still one block
    model.forward(s, some_ids(1, config.vocab_size));
    EXPECT_EQ(pool->used_blocks(), 2);
    s.reset();
    EXPECT_EQ(pool->used_blocks(), 0);
    EXPECT_TRUE(s.reserve(65));
    EXPECT_EQ(pool->used_blocks(), 3);
    EXPECT_TRUE(s.reserve(10));  // already held: nothing more, nothing given back
    EXPECT_EQ(pool->used_blocks(), 3);
    EXPECT_TRUE(s.reserve(1000));  // past the context: only the context's blocks
    EXPECT_EQ(pool->used_blocks(), 3);
    EXPECT_EQ(pool->free_blocks(), 2);
  }
  EXPECT_EQ(pool->used_blocks(), 0);  // a destroyed session gives its blocks back
  EXPECT_GT(pool->block_bytes(), 0);
  EXPECT_THROW(model.new_kv_pool(0), ValueError);
  GPT2 other = GPT2::from_tensors(config, share(tensors));
  EXPECT_THROW(other.new_session(pool), ValueError);
}

TEST_F(KvPoolTest, AFullPoolThrowsAndChangesNothing) {
  auto pool = model.new_kv_pool(2);
  Session a = model.new_session(pool), b = model.new_session(pool);
  model.forward(a, some_ids(40, config.vocab_size));  // 2 blocks: the pool is full
  EXPECT_FALSE(b.reserve(1));
  EXPECT_EQ(pool->used_blocks(), 2);
  const auto ids = some_ids(3, config.vocab_size);
  EXPECT_THROW(model.forward(b, ids), Error);
  EXPECT_EQ(b.length(), 0);
  std::vector<float> all(ids.size() * static_cast<std::size_t>(config.vocab_size));
  EXPECT_THROW(model.forward_all_logits(b, ids, all), Error);
  EXPECT_THROW(model.forward(a, some_ids(30, config.vocab_size)), Error);  // would need a third
  EXPECT_EQ(a.length(), 40);

  // A batch where one session cannot grow: neither advances, and the block the other took
  // for this step goes back.
  auto roomy = model.new_kv_pool(3);
  Session c = model.new_session(roomy), d = model.new_session(pool);
  model.forward(c, some_ids(32, config.vocab_size));  // its next position needs a second block
  std::vector<Session*> batch = {&c, &d};
  const std::vector<std::int32_t> next = {4, 5};
  EXPECT_THROW(model.forward_batch(batch, next), Error);
  EXPECT_EQ(c.length(), 32);
  EXPECT_EQ(d.length(), 0);
  EXPECT_EQ(roomy->used_blocks(), 1);
  a.reset();  // room again: the same batch runs
  const auto out = model.forward_batch(batch, next);
  EXPECT_EQ(c.length(), 33);
  EXPECT_EQ(d.length(), 1);
  EXPECT_EQ(roomy->used_blocks(), 2);
  EXPECT_EQ(pool->used_blocks(), 1);
}

TEST_F(KvPoolTest, ASharedPoolGivesTheLogitsOfPrivateOnes) {
  auto pool = model.new_kv_pool(6);
  const auto prompt = some_ids(45, config.vocab_size, 7);
  Session shared_a = model.new_session(pool), shared_b = model.new_session(pool), own = model.new_session();
  model.forward(shared_b, some_ids(20, config.vocab_size, 8));  // interleaves the pool's blocks
  std::vector<float> want = logits(own, prompt), got = logits(shared_a, prompt);
  ASSERT_EQ(got, want);
  for (std::int32_t token : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}) {
    model.forward(shared_b, std::vector<std::int32_t>{token});
    want = logits(own, {token});
    got = logits(shared_a, {token});
    ASSERT_EQ(got, want) << "at length " << own.length();
  }
}
