// KvPool (gpt2.hpp, model/kv_pool.hpp).
#include "model/kv_pool.hpp"

#include <new>

#include "kael/core/error.hpp"
#include "kernels/attention.hpp"

namespace kael::model {

KvPool::Impl::Impl(const void* owner_, const Config& c, std::int64_t max_blocks_)
    : owner(owner_),
      layer_floats(kernels::kv_layer_floats(c.n_head, c.head_dim(), kBlockPositions)),
      block_floats(2 * std::int64_t{c.n_layer} * layer_floats),
      max_blocks(max_blocks_) {
  if (max_blocks < 1) throw ValueError(str("a KV pool needs at least one block, found ", max_blocks));
}

bool KvPool::Impl::allocate(std::int64_t n, std::vector<float*>& out) {
  std::lock_guard lock(mutex);
  if (n > max_blocks - used) return false;
  try {
    // Blocks never used before are made now; not zero-filled, so untouched pages cost nothing.
    while (static_cast<std::int64_t>(spare.size()) < n) {
      storage.push_back(std::make_unique_for_overwrite<float[]>(static_cast<std::size_t>(block_floats)));
      spare.push_back(storage.back().get());
    }
  } catch (const std::bad_alloc&) {
    throw Error(str("out of memory allocating a KV block of ", block_floats * 4, " bytes"));
  }
  out.insert(out.end(), spare.end() - n, spare.end());
  spare.resize(spare.size() - static_cast<std::size_t>(n));
  used += n;
  return true;
}

void KvPool::Impl::release(const float* const* blocks, std::int64_t n) {
  std::lock_guard lock(mutex);
  for (std::int64_t i = 0; i < n; ++i) spare.push_back(const_cast<float*>(blocks[i]));
  used -= n;
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

}  // namespace kael::model
