// Server counters and histograms, rendered in Prometheus' text format for GET /metrics.
// One mutex guards everything: updates are a few per token, far below contention levels.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kael/model/gpt2.hpp"
#include "serve/finish_reason.hpp"

namespace kael::serve {

// A cumulative histogram with fixed upper bounds (the +Inf bucket is implied).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size(), 0) {}
  void observe(double value);
  // Appends the _bucket/_sum/_count lines for metric `name`.
  void render(std::string& out, std::string_view name, std::string_view help) const;

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;  // per bucket, not cumulative
  std::uint64_t count_ = 0;
  double sum_ = 0.0;
};

class Metrics {
 public:
  Metrics();

  void count_request(std::string_view route, int status);
  void count_prompt_tokens(std::int64_t n);
  void count_generated_tokens(std::int64_t n);
  void count_finished(FinishReason reason);
  void count_rejected();                          // 503: queue full
  void count_prefix_lookup(std::int64_t reused_tokens);  // a request admitted with the prefix cache on
  void observe_batch(int active_sequences, double step_seconds);
  void observe_time_to_first_token(double seconds);
  void observe_request(double seconds);

  // The KV pool whose blocks render() reports (gauges read at scrape time).
  void watch_kv_pool(std::shared_ptr<const model::KvPool> pool);

  // The whole exposition; the gauges are read by the caller at scrape time.
  std::string render(int queue_depth, int active_sequences, int max_batch) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::uint64_t> requests_;  // (route, status) -> count
  std::map<std::string, std::uint64_t> finished_;
  std::uint64_t prompt_tokens_ = 0;
  std::uint64_t generated_tokens_ = 0;
  std::uint64_t rejected_ = 0;
  std::uint64_t prefix_hits_ = 0, prefix_misses_ = 0, prefix_reused_tokens_ = 0;
  std::uint64_t decode_steps_ = 0;
  Histogram batch_size_;
  Histogram step_seconds_;
  Histogram ttft_seconds_;
  Histogram request_seconds_;
  std::shared_ptr<const model::KvPool> kv_pool_;
};

}  // namespace kael::serve
