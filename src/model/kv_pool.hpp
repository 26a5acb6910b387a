// The inside of KvPool (gpt2.hpp): blocks of KV-cache memory handed to sessions and taken back.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "kael/model/gpt2.hpp"

namespace kael::model {

// Positions per KV block: a multiple of the cache's 16-position panels. Smaller blocks waste
// less of a short sequence's last block; larger ones mean fewer key products per attention
// row (one per block) and fewer value copies.
inline constexpr std::int64_t kBlockPositions = KvPool::kBlockPositions;

}  // namespace kael::model

struct kael::model::KvPool::Impl {
  Impl(const void* owner, const Config& config, std::int64_t max_blocks);

  // Appends n blocks to `out`, all or none: false (out unchanged) when fewer are free. Error
  // when the memory of a block never used before cannot be allocated.
  bool allocate(std::int64_t n, std::vector<float*>& out);
  // Takes back blocks handed out by allocate.
  void release(const float* const* blocks, std::int64_t n);

  const void* owner;  // the GPT2::Impl the blocks are laid out for
  const std::int64_t layer_floats;  // keys (or values) of one layer of a block
  const std::int64_t block_floats;  // keys and values of every layer
  const std::int64_t max_blocks;

  mutable std::mutex mutex;  // guards what follows
  std::vector<std::unique_ptr<float[]>> storage;  // every block allocated so far
  std::vector<float*> spare;                      // allocated and not held
  std::int64_t used = 0;
};
