// Prometheus text exposition (metrics.hpp).
#include "serve/metrics.hpp"

#include <cstdio>

namespace kael::serve {
namespace {

std::string number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.9g", value);
  return buffer;
}

void header(std::string& out, std::string_view name, std::string_view help, std::string_view type) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

void sample(std::string& out, std::string_view name, std::string_view labels, double value) {
  out.append(name);
  if (!labels.empty()) out.append("{").append(labels).append("}");
  out.append(" ").append(number(value)).append("\n");
}

}  // namespace

void Histogram::observe(double value) {
  ++count_;
  sum_ += value;
  for (std::size_t i = 0; i < bounds_.size(); ++i)
    if (value <= bounds_[i]) {
      ++counts_[i];
      return;
    }
}

void Histogram::render(std::string& out, std::string_view name, std::string_view help) const {
  header(out, name, help, "histogram");
  const std::string bucket = std::string(name) + "_bucket";
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    sample(out, bucket, "le=\"" + number(bounds_[i]) + "\"", static_cast<double>(cumulative));
  }
  sample(out, bucket, "le=\"+Inf\"", static_cast<double>(count_));
  sample(out, std::string(name) + "_sum", "", sum_);
  sample(out, std::string(name) + "_count", "", static_cast<double>(count_));
}

Metrics::Metrics()
    : batch_size_({1, 2, 4, 8, 16, 32, 64}),
      step_seconds_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}),
      ttft_seconds_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}),
      request_seconds_({0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}) {}

void Metrics::count_request(std::string_view route, int status) {
  std::lock_guard lock(mutex_);
  ++requests_[{std::string(route), status}];
}
void Metrics::count_prompt_tokens(std::int64_t n) {
  std::lock_guard lock(mutex_);
  prompt_tokens_ += static_cast<std::uint64_t>(n);
}
void Metrics::count_generated_tokens(std::int64_t n) {
  std::lock_guard lock(mutex_);
  generated_tokens_ += static_cast<std::uint64_t>(n);
}
void Metrics::count_finished(FinishReason reason) {
  std::lock_guard lock(mutex_);
  ++finished_[std::string(finish_reason_name(reason))];
}
void Metrics::count_prefix_lookup(std::int64_t reused_tokens) {
  std::lock_guard lock(mutex_);
  ++(reused_tokens > 0 ? prefix_hits_ : prefix_misses_);
  prefix_reused_tokens_ += static_cast<std::uint64_t>(reused_tokens);
}
void Metrics::count_rejected() {
  std::lock_guard lock(mutex_);
  ++rejected_;
}
void Metrics::observe_batch(int active_sequences, double step_seconds) {
  std::lock_guard lock(mutex_);
  ++decode_steps_;
  batch_size_.observe(active_sequences);
  step_seconds_.observe(step_seconds);
}
void Metrics::observe_time_to_first_token(double seconds) {
  std::lock_guard lock(mutex_);
  ttft_seconds_.observe(seconds);
}
void Metrics::observe_request(double seconds) {
  std::lock_guard lock(mutex_);
  request_seconds_.observe(seconds);
}

void Metrics::watch_kv_pool(std::shared_ptr<const model::KvPool> pool) {
  std::lock_guard lock(mutex_);
  kv_pool_ = std::move(pool);
}

namespace {

// The KV memory's gauges: what a load balancer routes on, with the queue depth.
void render_kv_pool(std::string& out, const model::KvPool& pool) {
  const auto used = static_cast<double>(pool.used_blocks()), total = static_cast<double>(pool.total_blocks());
  header(out, "kael_kv_blocks_total", "KV cache blocks the server may hold (--kv-memory-mb).", "gauge");
  sample(out, "kael_kv_blocks_total", "", total);
  header(out, "kael_kv_blocks_used", "KV cache blocks reserved by running requests.", "gauge");
  sample(out, "kael_kv_blocks_used", "", used);
  header(out, "kael_kv_blocks_free", "KV cache blocks free for new requests.", "gauge");
  sample(out, "kael_kv_blocks_free", "", total - used);
  header(out, "kael_kv_block_positions", "Token positions per KV cache block.", "gauge");
  sample(out, "kael_kv_block_positions", "", static_cast<double>(pool.block_positions()));
  header(out, "kael_prefix_cache_blocks", "KV blocks of recent prompts in the prefix cache (--prefix-cache-mb).",
         "gauge");
  sample(out, "kael_prefix_cache_blocks", "", static_cast<double>(pool.cached_blocks()));
  header(out, "kael_kv_block_bytes", "Bytes of one KV cache block (every layer's keys and values).", "gauge");
  sample(out, "kael_kv_block_bytes", "", static_cast<double>(pool.block_bytes()));
}

}  // namespace

std::string Metrics::render(int queue_depth, int active_sequences, int max_batch) const {
  std::lock_guard lock(mutex_);
  std::string out;
  header(out, "kael_http_requests_total", "HTTP requests answered, by route and status.", "counter");
  for (const auto& [key, count] : requests_)
    sample(out, "kael_http_requests_total", "route=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"",
           static_cast<double>(count));
  header(out, "kael_completions_finished_total", "Completions ended, by finish reason.", "counter");
  for (const auto& [reason, count] : finished_)
    sample(out, "kael_completions_finished_total", "reason=\"" + reason + "\"", static_cast<double>(count));
  header(out, "kael_rejected_total", "Completions refused with 503 because the queue was full.", "counter");
  sample(out, "kael_rejected_total", "", static_cast<double>(rejected_));
  header(out, "kael_prompt_tokens_total", "Prompt tokens prefilled.", "counter");
  sample(out, "kael_prompt_tokens_total", "", static_cast<double>(prompt_tokens_));
  header(out, "kael_generated_tokens_total", "Tokens generated.", "counter");
  sample(out, "kael_generated_tokens_total", "", static_cast<double>(generated_tokens_));
  header(out, "kael_decode_steps_total", "Batched decode steps run.", "counter");
  sample(out, "kael_decode_steps_total", "", static_cast<double>(decode_steps_));
  header(out, "kael_queue_depth", "Completions waiting for a batch slot.", "gauge");
  sample(out, "kael_queue_depth", "", queue_depth);
  header(out, "kael_active_sequences", "Completions in the running batch.", "gauge");
  sample(out, "kael_active_sequences", "", active_sequences);
  header(out, "kael_max_batch", "Batch slots (--max-batch).", "gauge");
  sample(out, "kael_max_batch", "", max_batch);
  if (kv_pool_) render_kv_pool(out, *kv_pool_);
  header(out, "kael_prefix_cache_hits_total", "Requests that started from cached prompt blocks.", "counter");
  sample(out, "kael_prefix_cache_hits_total", "", static_cast<double>(prefix_hits_));
  header(out, "kael_prefix_cache_misses_total", "Requests, with the prefix cache on, that found no cached block.",
         "counter");
  sample(out, "kael_prefix_cache_misses_total", "", static_cast<double>(prefix_misses_));
  header(out, "kael_prefix_cache_reused_tokens_total", "Prompt tokens taken from the prefix cache, not prefilled.",
         "counter");
  sample(out, "kael_prefix_cache_reused_tokens_total", "", static_cast<double>(prefix_reused_tokens_));
  batch_size_.render(out, "kael_batch_size", "Sequences per decode step.");
  step_seconds_.render(out, "kael_decode_step_seconds", "Duration of one batched decode step.");
  ttft_seconds_.render(out, "kael_time_to_first_token_seconds", "From request arrival to its first token.");
  request_seconds_.render(out, "kael_request_duration_seconds", "From request arrival to its end: finished, cancelled or timed out.");
  return out;
}

}  // namespace kael::serve
