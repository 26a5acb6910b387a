// The inside of KvPool (gpt2.hpp): blocks of KV-cache memory handed to sessions and taken
// back, with reference counts, and the prefix cache: full blocks of computed prompts kept,
// keyed by their tokens and their parent block, for later sessions to start from.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "kael/model/gpt2.hpp"

namespace kael::model {

// Positions per KV block: a multiple of the cache's 16-position panels. Smaller blocks waste
// less of a short sequence's last block and share prefixes more finely; larger ones mean
// fewer key products per attention row (one per block) and fewer value copies.
inline constexpr std::int64_t kBlockPositions = KvPool::kBlockPositions;

}  // namespace kael::model

struct kael::model::KvPool::Impl {
  Impl(const void* owner, const Config& config, std::int64_t max_blocks);

  // Appends n blocks to `out`, all or none, each held once: false (out unchanged) when fewer
  // are free (cached blocks no session holds count as free: the least recently used go
  // first). Error when the memory of a block never used before cannot be allocated.
  bool allocate(std::int64_t n, std::vector<float*>& out);
  // Drops one hold of each block; a block no longer held goes back, or stays in the prefix
  // cache when it is cached (the oldest beyond the cache's cap are dropped).
  void release(const float* const* blocks, std::int64_t n);

  // The cached blocks of the longest prefix of `tokens` held in whole blocks, at most
  // max_blocks of them, appended to `out` and held once more each; returns how many.
  std::int64_t attach_prefix(std::span<const std::int32_t> tokens, std::int64_t max_blocks, std::vector<float*>& out);
  // Caches blocks[b] for the tokens of block b, for every b whose block is full within
  // `tokens` (already computed: nothing writes a full block again).
  void publish_prefix(std::span<const std::int32_t> tokens, const float* const* blocks, std::int64_t n);

  const void* owner;  // the GPT2::Impl the blocks are laid out for
  const std::int64_t layer_floats;  // keys (or values) of one layer of a block
  const std::int64_t block_floats;  // keys and values of every layer
  const std::int64_t max_blocks;

  struct Block {
    int holds = 0;
    // Cached: the prefix ending with this block is (parent's prefix, tokens); id names it.
    bool cached = false;
    std::uint64_t id = 0, parent = 0;  // parent 0: the first block of a sequence
    std::vector<std::int32_t> tokens;
    std::list<const float*>::iterator unheld;  // in lru, when cached and held by nobody
  };

  mutable std::mutex mutex;  // guards what follows
  // The memory of every block made so far, in slabs of up to kSlabBlocks blocks (kv_pool.cpp).
  std::vector<std::shared_ptr<void>> slabs;
  std::int64_t made = 0;           // blocks carved from the slabs
  std::unordered_map<const float*, Block> blocks;
  std::vector<float*> spare;       // allocated, not held, not cached
  std::list<const float*> lru;     // cached, not held: most recently released first
  std::unordered_map<std::uint64_t, const float*> cache;  // key(parent, tokens) -> block
  std::int64_t used = 0;           // blocks held
  std::int64_t cache_cap = 0;      // cached blocks kept beyond those held; 0: no prefix cache
  std::uint64_t next_id = 0;

  void evict_oldest();  // the least recently used unheld cached block goes to spare
  void add_slab();      // makes the next slab's blocks spare (made < max_blocks)
  // The cached block of (parent, tokens), or null.
  const float* find(std::uint64_t parent, std::span<const std::int32_t> tokens) const;
};
