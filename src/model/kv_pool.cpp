// KvPool (gpt2.hpp, model/kv_pool.hpp).
#include "model/kv_pool.hpp"

#include <algorithm>
#include <cstdlib>
#include <new>

#include "core/huge_pages.hpp"
#include "kael/core/error.hpp"
#include "kernels/attention.hpp"

namespace kael::model {
namespace {

// The cache key of a block: its parent's id and its tokens (FNV-1a). Lookups compare both
// exactly, so a collision only loses a hit.
std::uint64_t block_key(std::uint64_t parent, std::span<const std::int32_t> tokens) {
  std::uint64_t h = 1469598103934665603ull ^ parent;
  for (std::int32_t t : tokens) h = (h ^ static_cast<std::uint32_t>(t)) * 1099511628211ull;
  return h;
}

// Block memory comes in slabs on huge pages (allocate_huge_aligned): the first prefill into
// fresh blocks then takes a page fault per 2 MiB instead of per 4 KiB (the CPU time this saves:
// docs/performance.md, "The measurements behind the code's constants"). The pages of blocks no
// position reached cost nothing until touched (at most one huge page past the last block
// touched). Slabs of a few blocks: memory is taken in steps no larger than 16 MiB or so beyond
// what a pool uses.
constexpr std::int64_t kSlabBlocks = 8;

// A slab where huge pages cannot be had: the heap, on a cache line.
std::shared_ptr<void> heap_slab(std::size_t bytes) {
  constexpr std::size_t kLine = 64;
  void* memory = std::aligned_alloc(kLine, (bytes + kLine - 1) / kLine * kLine);
  if (memory == nullptr) throw std::bad_alloc();
  return std::shared_ptr<void>(memory, [](void* p) { std::free(p); });
}

}  // namespace

KvPool::Impl::Impl(const void* owner_, const Config& c, std::int64_t max_blocks_)
    : owner(owner_),
      layer_floats(kernels::kv_layer_floats(c.n_head, c.head_dim(), kBlockPositions)),
      block_floats(2 * std::int64_t{c.n_layer} * layer_floats),
      max_blocks(max_blocks_) {
  if (max_blocks < 1) throw ValueError(str("a KV pool needs at least one block, found ", max_blocks));
}

void KvPool::Impl::add_slab() {
  const std::int64_t n = std::min(kSlabBlocks, max_blocks - made);
  const std::size_t bytes = static_cast<std::size_t>(n * block_floats) * sizeof(float);
  std::shared_ptr<void> memory = allocate_huge_aligned(bytes);
  if (memory == nullptr) memory = heap_slab(bytes);
  float* slab = static_cast<float*>(memory.get());
  slabs.push_back(std::move(memory));
  // Spare blocks are taken from the back: the slab's first block goes first.
  for (std::int64_t b = n - 1; b >= 0; --b) {
    blocks.emplace(slab + b * block_floats, Block{});
    spare.push_back(slab + b * block_floats);
    ++made;  // counted one by one: a block is made once it is spare
  }
}

void KvPool::Impl::evict_oldest() {
  const float* block = lru.back();
  lru.pop_back();
  Block& meta = blocks.at(block);
  cache.erase(block_key(meta.parent, meta.tokens));
  meta.cached = false;
  meta.tokens.clear();
  spare.push_back(const_cast<float*>(block));
}

bool KvPool::Impl::allocate(std::int64_t n, std::vector<float*>& out) {
  std::lock_guard lock(mutex);
  if (n > max_blocks - used) return false;
  try {
    // Blocks never used before are made while there is room (a slab at a time); past that,
    // cached blocks nobody holds are reused, oldest first.
    while (static_cast<std::int64_t>(spare.size()) < n) {
      if (made < max_blocks)
        add_slab();
      else
        evict_oldest();
    }
  } catch (const std::bad_alloc&) {
    throw Error(str("out of memory allocating KV blocks of ", block_floats * 4, " bytes"));
  }
  for (auto it = spare.end() - n; it != spare.end(); ++it) blocks.at(*it).holds = 1;
  out.insert(out.end(), spare.end() - n, spare.end());
  spare.resize(spare.size() - static_cast<std::size_t>(n));
  used += n;
  return true;
}

void KvPool::Impl::release(const float* const* held, std::int64_t n) {
  std::lock_guard lock(mutex);
  for (std::int64_t i = 0; i < n; ++i) {
    Block& meta = blocks.at(held[i]);
    if (--meta.holds > 0) continue;
    --used;
    if (meta.cached) {
      lru.push_front(held[i]);
      meta.unheld = lru.begin();
    } else {
      spare.push_back(const_cast<float*>(held[i]));
    }
  }
  while (static_cast<std::int64_t>(lru.size()) > cache_cap) evict_oldest();
}

const float* KvPool::Impl::find(std::uint64_t parent, std::span<const std::int32_t> tokens) const {
  const auto it = cache.find(block_key(parent, tokens));
  if (it == cache.end()) return nullptr;
  const Block& meta = blocks.at(it->second);
  return meta.parent == parent && std::equal(tokens.begin(), tokens.end(), meta.tokens.begin(), meta.tokens.end())
             ? it->second
             : nullptr;
}

std::int64_t KvPool::Impl::attach_prefix(std::span<const std::int32_t> tokens, std::int64_t most,
                                         std::vector<float*>& out) {
  std::lock_guard lock(mutex);
  if (cache_cap == 0) return 0;
  std::uint64_t parent = 0;
  std::int64_t found = 0;
  for (; found < most && (found + 1) * kBlockPositions <= static_cast<std::int64_t>(tokens.size()); ++found) {
    const float* block = find(parent, tokens.subspan(static_cast<std::size_t>(found * kBlockPositions), kBlockPositions));
    if (block == nullptr) break;
    Block& meta = blocks.at(block);
    if (meta.holds++ == 0) {  // was only cached: held again
      lru.erase(meta.unheld);
      ++used;
    }
    out.push_back(const_cast<float*>(block));
    parent = meta.id;
  }
  return found;
}

void KvPool::Impl::publish_prefix(std::span<const std::int32_t> tokens, const float* const* held, std::int64_t n) {
  std::lock_guard lock(mutex);
  if (cache_cap == 0) return;
  std::uint64_t parent = 0;
  for (std::int64_t b = 0; b < n && (b + 1) * kBlockPositions <= static_cast<std::int64_t>(tokens.size()); ++b) {
    const auto block_tokens = tokens.subspan(static_cast<std::size_t>(b * kBlockPositions), kBlockPositions);
    Block& meta = blocks.at(held[b]);
    if (meta.cached) {  // attached from the cache, or published before
      parent = meta.id;
      continue;
    }
    if (const float* same = find(parent, block_tokens)) {  // another sequence cached this prefix first
      parent = blocks.at(same).id;
      continue;
    }
    meta.cached = true;
    meta.id = ++next_id;
    meta.parent = parent;
    meta.tokens.assign(block_tokens.begin(), block_tokens.end());
    cache.emplace(block_key(parent, block_tokens), held[b]);
    parent = meta.id;
  }
}

KvPool::KvPool(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KvPool::~KvPool() = default;
std::int64_t KvPool::block_positions() const { return kBlockPositions; }
std::int64_t KvPool::block_bytes() const { return impl_->block_floats * static_cast<std::int64_t>(sizeof(float)); }
std::int64_t KvPool::total_blocks() const { return impl_->max_blocks; }
std::int64_t KvPool::used_blocks() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->used;
}
std::int64_t KvPool::blocks_for(std::int64_t positions) const {
  return (std::max<std::int64_t>(0, positions) + kBlockPositions - 1) / kBlockPositions;
}
void KvPool::set_prefix_cache_blocks(std::int64_t n) {
  if (n < 0) throw ValueError(str("the prefix cache's blocks must be >= 0, found ", n));
  std::lock_guard lock(impl_->mutex);
  impl_->cache_cap = n;
  while (static_cast<std::int64_t>(impl_->lru.size()) > n) impl_->evict_oldest();
}
std::int64_t KvPool::cached_blocks() const {
  std::lock_guard lock(impl_->mutex);
  return static_cast<std::int64_t>(impl_->cache.size());
}

}  // namespace kael::model
