// GPT2::copy_session: a beam forking from another copies only the cache positions in use,
// block by block, into blocks of its own.
#include <algorithm>

#include "kael/core/error.hpp"
#include "kael/model/gpt2.hpp"
#include "kernels/attention.hpp"
#include "model/state.hpp"

namespace kael::model {

void GPT2::copy_session(Session& dst, const Session& src) const {
  Session::State& to = *dst.state_;
  const Session::State& from = *src.state_;
  if (to.owner != impl_.get() || from.owner != impl_.get())
    throw ValueError("copy_session: a session was made by a different model");
  if (&to == &from) return;
  const Config& c = config();
  const std::int64_t n_blocks = to.pool->blocks_for(from.length);
  to.shrink_to_blocks(0);  // blocks it held may be shared (prefix cache): the copy takes new ones
  if (!to.grow_to(from.length)) {
    to.shrink_to_blocks(0);
    to.length = 0;
    throw Error(str("copy_session: the KV pool is full (", to.pool->used_blocks(), " of ", to.pool->total_blocks(),
                    " blocks in use; the copy needs ", n_blocks, ")"));
  }
  const std::int64_t NH = c.n_head, D = c.head_dim(), BP = kBlockPositions;
  const std::int64_t head_floats = kernels::kv_head_floats(D, BP);
  for (std::int64_t layer = 0; layer < c.n_layer; ++layer) {
    const kernels::KvBlocks source = from.layer_cache(static_cast<int>(layer));
    const kernels::KvBlocks target = to.layer_cache(static_cast<int>(layer));
    for (std::int64_t b = 0; b < n_blocks; ++b) {
      const std::int64_t used = std::min(BP, from.length - b * BP);  // positions of this block in use
      for (std::int64_t h = 0; h < NH; ++h) {
        const std::int64_t k_at = source.key_offset + h * head_floats, v_at = source.value_offset + h * head_floats;
        kernels::kv_copy_head(target.blocks[b] + k_at, target.blocks[b] + v_at, BP, source.blocks[b] + k_at,
                              source.blocks[b] + v_at, BP, D, used);
      }
    }
  }
  to.length = from.length;
}

}  // namespace kael::model
