// GPT2::copy_session: a beam forking from another copies only the cache positions in use.
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
  const std::int64_t NH = c.n_head, D = c.head_dim(), L = from.length;
  const std::int64_t capacity = kernels::kv_capacity(c.n_positions);
  const std::int64_t head_floats = kernels::kv_head_floats(D, c.n_positions);
  const std::int64_t layer_floats = kernels::kv_layer_floats(NH, D, c.n_positions);
  constexpr std::int64_t kPanel = 16;  // the cache's panel width (kernels/attention.hpp)
  const std::int64_t key_floats = (L + kPanel - 1) / kPanel * kPanel * D;  // panels of 16 positions
  for (std::int64_t layer = 0; layer < c.n_layer; ++layer) {
    for (std::int64_t h = 0; h < NH; ++h) {
      const std::int64_t at = layer * layer_floats + h * head_floats;
      // Keys: K^T in panels of 16 positions, each 16 * D floats, panel after panel.
      std::copy_n(from.k_cache.get() + at, key_floats, to.k_cache.get() + at);
      // Values: panels of 16 dimensions, each `capacity` rows of 16; copy the first L rows.
      for (std::int64_t d0 = 0; d0 < D; d0 += kPanel)
        std::copy_n(from.v_cache.get() + at + d0 * capacity, L * kPanel, to.v_cache.get() + at + d0 * capacity);
    }
  }
  to.length = from.length;
}

}  // namespace kael::model
