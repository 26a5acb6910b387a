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
  constexpr std::int64_t kPanel = 16;  // the cache's panel width (kernels/attention.hpp)
  for (std::int64_t layer = 0; layer < c.n_layer; ++layer) {
    const kernels::KvBlocks source = from.layer_cache(static_cast<int>(layer));
    const kernels::KvBlocks target = to.layer_cache(static_cast<int>(layer));
    for (std::int64_t b = 0; b < n_blocks; ++b) {
      const std::int64_t used = std::min(BP, from.length - b * BP);  // positions of this block in use
      const std::int64_t key_floats = (used + kPanel - 1) / kPanel * kPanel * D;  // panels of 16 positions
      for (std::int64_t h = 0; h < NH; ++h) {
        // Keys: K^T in panels of 16 positions, each 16 * D floats, panel after panel.
        const std::int64_t k_at = source.key_offset + h * head_floats;
        std::copy_n(source.blocks[b] + k_at, key_floats, target.blocks[b] + k_at);
        // Values: panels of 16 dimensions, each BP rows of 16; copy the rows in use.
        const std::int64_t v_at = source.value_offset + h * head_floats;
        for (std::int64_t d0 = 0; d0 < D; d0 += kPanel)
          std::copy_n(source.blocks[b] + v_at + d0 * BP, used * kPanel, target.blocks[b] + v_at + d0 * BP);
      }
    }
  }
  to.length = from.length;
}

}  // namespace kael::model
