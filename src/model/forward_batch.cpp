// One decode step for a batch of sequences: the blocks' products run on all B rows at once
// (model/layers.hpp), while the KV-cache update and attention use each sequence's own cache
// and position.
#include <algorithm>

#include "kernels/attention.hpp"
#include "model/forward.hpp"
#include "model/layers.hpp"
#include "model/profile.hpp"

namespace kael::model {
namespace {

namespace k = kael::kernels;

// Row b is sequence states[b] at its next position.
class BatchAttention final : public CacheAttention {
 public:
  BatchAttention(const Config& config, BatchWorkspace& ws, Session::State* const* states, std::int64_t B)
      : config_(config), ws_(ws), states_(states), B_(B) {}

  void attend(float* att, const float* qkv, int layer) override {
    const std::int64_t C = config_.n_embd, NH = config_.n_head, D = config_.head_dim();
    for (std::int64_t b = 0; b < B_; ++b) {
      Session::State& s = *states_[b];
      const float* row = qkv + b * 3 * C;  // q, k, v
      const k::KvBlocks cache = s.layer_cache(layer);
      k::kv_store_paged(cache, row + C, row + 2 * C, s.length, NH, D);
      ws_.rows[static_cast<std::size_t>(b)] = {att + b * C, row, cache, s.length};
    }
    k::paged_attention_rows(ws_.rows.data(), B_, ws_.scores.data(), config_.n_positions, NH, D);  // (B, C)
  }

 private:
  const Config& config_;
  BatchWorkspace& ws_;
  Session::State* const* states_;
  std::int64_t B_;
};

}  // namespace

void BatchWorkspace::reserve(const Config& config, std::int64_t batch) {
  if (batch <= capacity) return;
  const auto n = [batch](std::int64_t per_row) { return static_cast<std::size_t>(batch * per_row); };
  const std::int64_t C = config.n_embd;
  x.resize(n(C));
  ln.resize(n(C));
  qkv.resize(n(3 * C));
  att.resize(n(C));
  fc.resize(n(config.mlp_dim()));
  scores.resize(n(std::int64_t{config.n_head} * config.n_positions));
  logits.resize(n(config.vocab_size));
  rows.resize(static_cast<std::size_t>(batch));
  capacity = batch;
}

void forward_batch_step(const Config& config, const Weights& weights, BatchWorkspace& ws,
                        Session::State* const* states, const std::int32_t* tokens, std::int64_t B,
                        const std::vector<ForwardProfile*>& profiles) {
  const std::int64_t C = config.n_embd, V = config.vocab_size;
  ForwardProfile step;
  PartTimer timer(profiles.empty() ? nullptr : &step);
  for (std::int64_t b = 0; b < B; ++b)  // each row at its own position
    embed(ws.x.data() + b * C, weights, config, tokens + b, 1, states[b]->length);
  timer.skip();
  BatchAttention cache(config, ws, states, B);
  run_layers(config, weights, {ws.x.data(), ws.ln.data(), ws.qkv.data(), ws.att.data(), ws.fc.data(), B}, cache,
             timer);
  final_logits(config, weights, ws.logits.data(), ws.ln.data(), ws.x.data(), B, timer);  // (B, V)
  for (std::int64_t b = 0; b < B; ++b) {
    std::copy_n(ws.logits.data() + b * V, V, states[b]->logits.get());
    states[b]->length += 1;
  }
  timer.finish();
  for (ForwardProfile* p : profiles) {
    p->attention_ms += step.attention_ms;
    p->mlp_ms += step.mlp_ms;
    p->layer_norm_ms += step.layer_norm_ms;
    p->logits_ms += step.logits_ms;
    p->total_ms += step.total_ms;
  }
}

}  // namespace kael::model
