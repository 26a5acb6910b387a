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

// Prefix caching: a session that attaches the cached blocks of a prompt's start and computes
// the rest gets the logits of computing it all, bit for bit; sessions sharing blocks never
// see each other's later positions; unheld cached blocks go oldest first, and before a pool
// runs short.
TEST_F(KvPoolTest, PrefixCacheHitsGiveTheSameLogits) {
  Config c = tiny_config();
  c.n_positions = 160;  // 5 blocks
  GPT2 m = GPT2::from_tensors(c, tiny_checkpoint(c, 3));
  auto pool = m.new_kv_pool(12);
  const auto prompt = some_ids(75, c.vocab_size, 5);  // 2 full blocks + 11 tokens
  Session fresh = m.new_session();
  const auto whole = m.forward(fresh, prompt);
  const std::vector<float> want(whole.begin(), whole.end());

  Session first = m.new_session(pool);
  EXPECT_EQ(first.attach_prefix(prompt), 0);  // caching is off
  pool->set_prefix_cache_blocks(4);
  EXPECT_EQ(first.attach_prefix(prompt), 0);  // nothing cached yet: a miss
  m.forward(first, prompt);
  first.publish_prefix(prompt);
  EXPECT_EQ(pool->cached_blocks(), 2);

  Session second = m.new_session(pool);
  ASSERT_EQ(second.attach_prefix(prompt), 64);
  EXPECT_EQ(pool->used_blocks(), 3);  // the two shared blocks are held twice, counted once
  const auto rest = std::span(prompt).subspan(64);
  const auto got = m.forward(second, rest);
  ASSERT_TRUE(std::equal(got.begin(), got.end(), want.begin(), want.end()));

  // Different continuations on the shared blocks: each equals its own uncached run.
  for (std::int32_t token : {1, 2, 3}) {
    const std::vector<std::int32_t> a = {token}, b = {static_cast<std::int32_t>(token + 10)};
    m.forward(first, a);
    const auto l = m.forward(second, b);
    const std::vector<float> shared(l.begin(), l.end());
    const auto f = m.forward(fresh, b);
    ASSERT_TRUE(std::equal(f.begin(), f.end(), shared.begin(), shared.end()));
  }

  // A prompt that shares only the first block attaches one; one as short as a block none
  // (its last token must be computed).
  auto other = prompt;
  other[40] = (other[40] + 1) % c.vocab_size;
  Session third = m.new_session(pool);
  EXPECT_EQ(third.attach_prefix(other), 32);
  Session short_one = m.new_session(pool);
  EXPECT_EQ(short_one.attach_prefix(std::span(prompt).first(32)), 0);
  EXPECT_EQ(short_one.attach_prefix(std::span(prompt).first(33)), 32);

  // Released, the cached blocks stay (up to the cap) and still hit.
  first.reset();
  second.reset();
  third.reset();
  short_one.reset();
  EXPECT_EQ(pool->used_blocks(), 0);
  EXPECT_EQ(pool->cached_blocks(), 2);
  Session again = m.new_session(pool);
  EXPECT_EQ(again.attach_prefix(prompt), 64);
  again.reset();

  // A pool that needs every block takes the cached ones nobody holds.
  std::vector<Session> hogs;
  for (int i = 0; i < 12; ++i) {
    hogs.push_back(m.new_session(pool));
    ASSERT_TRUE(hogs.back().reserve(1)) << i;
  }
  EXPECT_EQ(pool->cached_blocks(), 0);
  hogs.clear();
  Session miss = m.new_session(pool);
  EXPECT_EQ(miss.attach_prefix(prompt), 0);

  // The cap: the least recently released go first.
  pool->set_prefix_cache_blocks(1);
  m.forward(miss, prompt);
  miss.publish_prefix(prompt);
  EXPECT_EQ(pool->cached_blocks(), 2);  // held: kept whatever the cap
  miss.reset();
  EXPECT_EQ(pool->cached_blocks(), 1);
  pool->set_prefix_cache_blocks(0);
  EXPECT_EQ(pool->cached_blocks(), 0);
  EXPECT_THROW(pool->set_prefix_cache_blocks(-1), ValueError);
}
