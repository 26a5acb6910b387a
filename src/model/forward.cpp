#include "model/forward.hpp"

#include "kernels/attention.hpp"
#include "model/layers.hpp"
#include "model/profile.hpp"

namespace kael::model {
namespace {

namespace k = kael::kernels;

// T new positions of one sequence, starting at pos0: every row's key and value go into the
// same cache, and each row attends to the positions up to its own.
class ChunkAttention final : public CacheAttention {
 public:
  ChunkAttention(const Config& config, Session::State& state, std::int64_t T, std::int64_t pos0)
      : config_(config), state_(state), T_(T), pos0_(pos0) {}

  void attend(float* att, const float* qkv, int layer) override {
    const std::int64_t C = config_.n_embd, NH = config_.n_head, D = config_.head_dim();
    const k::KvBlocks cache = state_.layer_cache(layer);
    const k::NewKv rows{qkv + C, qkv + 2 * C, 3 * C};  // rows of q, k, v: stored by the attention's threads
    k::paged_attention(att, state_.scores.get(), qkv, 3 * C, cache, T_, pos0_, NH, D, &rows);  // (T, C)
  }

 private:
  const Config& config_;
  Session::State& state_;
  std::int64_t T_, pos0_;
};

}  // namespace

void forward_chunk(const Config& config, const Weights& weights, Session::State& state, const std::int32_t* tokens,
                   std::int64_t T, bool want_logits, float* all_logits) {
  const std::int64_t C = config.n_embd, pos0 = state.length;
  PartTimer timer(state.profile);
  embed(state.x.get(), weights, config, tokens, T, pos0);  // (T, C)
  timer.skip();  // the embedding counts as "other"
  ChunkAttention cache(config, state, T, pos0);
  run_layers(config, weights, {state.x.get(), state.ln.get(), state.qkv.get(), state.att.get(), state.fc.get(), T},
             cache, timer);
  state.length += static_cast<int>(T);
  if (all_logits)  // a whole text scored in one pass
    final_logits(config, weights, all_logits, state.ln.get(), state.x.get(), T, timer);  // (T, V)
  else if (want_logits)  // decoding needs only the last position
    final_logits(config, weights, state.logits.get(), state.ln.get(), state.x.get() + (T - 1) * C, 1, timer);  // (V)
  timer.finish();
}

}  // namespace kael::model
