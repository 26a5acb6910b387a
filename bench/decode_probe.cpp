// Batch-1 decode against the read bandwidth, taken in turns: one greedy decode step, then one
// pass of the read probe (bandwidth.cpp's sum) over a buffer as large as the bytes a step
// reads, on the same pool threads, and again. The host moves its bandwidth between two levels
// from one second to the next (docs/performance.md, "Decode against the bandwidth on a
// Zen 4"), so a step is set against the probe passes just before and after it, a few
// milliseconds apart, instead of a whole run against the probe's best moment.
// Prints one JSON line:
//   {"dtype", "threads", "step_mb", "steps", "step_ms_p50", "step_gb_s_p50", "probe_gb_s_p50",
//    "vs_probe_p25", "vs_probe_p50", "vs_probe_p75", "fastest_step_vs_probe"}
// where step_mb follows bench/compare.py (the matrices at the weight type's bytes, int8 with a
// BF16 scale per 32, the biases and LayerNorm in F32) and vs_probe is, per step, its read rate
// over the mean of its two neighbouring probe passes.
// Usage: decode_probe MODEL_DIR [threads] [f32|f16|bf16|int8] [steps, default 128]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <sys/mman.h>

#include "kael/model/gpt2.hpp"
#include "kernels/infra/thread_pool.hpp"
#include "read_probe.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kHugePage = std::size_t{2} << 20;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5))];
}

// The bytes one batch-1 step reads, as bench/compare.py counts them.
double step_bytes(const kael::model::Config& c, const std::string& dtype) {
  const double C = c.n_embd, L = c.n_layer;
  const double matrices = L * 12 * C * C + static_cast<double>(c.vocab_size) * C, vectors = L * 13 * C + 2 * C;
  const double per_weight = dtype == "f32" ? 4 : dtype == "int8" ? 1 + 2.0 / 32 : 2;
  return matrices * per_weight + 4 * vectors;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: decode_probe MODEL_DIR [threads] [f32|f16|bf16|int8] [steps]\n");
    return 2;
  }
  const int threads = argc > 2 ? std::atoi(argv[2]) : 0;
  const std::string dtype = argc > 3 ? argv[3] : "f32";
  const int steps = argc > 4 ? std::atoi(argv[4]) : 128;
  kael::model::set_num_threads(threads);
  kael::model::LoadOptions options;
  options.dtype = kael::model::parse_weight_dtype(dtype);
  const auto model = kael::model::GPT2::load(argv[1], options);
  const double bytes = step_bytes(model.config(), dtype);

  // The probe's buffer, a multiple of 32 floats per thread, on huge pages as the weights are,
  // each share touched by the thread that reads it.
  const int parts = kael::kernels::num_threads();
  const std::int64_t per = static_cast<std::int64_t>(bytes / 4) / (32 * parts) * 32;
  const std::int64_t n = per * parts;
  const std::size_t alloc = (static_cast<std::size_t>(n) * 4 + kHugePage - 1) / kHugePage * kHugePage;
  float* buffer = static_cast<float*>(std::aligned_alloc(kHugePage, alloc));
  if (buffer == nullptr) return 1;
  madvise(buffer, alloc, MADV_HUGEPAGE);
  std::vector<float> sink(static_cast<std::size_t>(parts));
  kael::kernels::parallel_for(parts, 1, [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t p = p0; p < p1; ++p) std::memset(buffer + p * per, 1, static_cast<std::size_t>(per) * 4);
  });
  const auto probe = [&] {
    const auto start = Clock::now();
    kael::kernels::parallel_for(parts, 1, [&](std::int64_t p0, std::int64_t p1) {
      for (std::int64_t p = p0; p < p1; ++p) sink[static_cast<std::size_t>(p)] += kael::bench::read_sum(buffer + p * per, per);
    });
    return static_cast<double>(n) * 4 / seconds_since(start) / 1e9;
  };

  auto session = model.new_session();
  std::vector<std::int32_t> prompt(16);
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<std::int32_t>(i * 997 % 50000);
  const auto argmax = [](std::span<const float> l) {
    return static_cast<std::int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
  };
  std::int32_t next = argmax(model.forward(session, prompt));
  for (int i = 0; i < 4; ++i) next = argmax(model.forward(session, std::span(&next, 1)));  // warm-up

  std::vector<double> probe_gb_s{probe()}, step_s;
  for (int s = 0; s < steps; ++s) {
    const auto start = Clock::now();
    next = argmax(model.forward(session, std::span(&next, 1)));
    step_s.push_back(seconds_since(start));
    probe_gb_s.push_back(probe());
  }
  std::vector<double> vs_probe, step_gb_s;
  for (int s = 0; s < steps; ++s) {
    const double rate = bytes / step_s[static_cast<std::size_t>(s)] / 1e9;
    step_gb_s.push_back(rate);
    vs_probe.push_back(rate / (0.5 * (probe_gb_s[static_cast<std::size_t>(s)] + probe_gb_s[static_cast<std::size_t>(s) + 1])));
  }
  std::printf(
      "{\"dtype\": \"%s\", \"threads\": %d, \"step_mb\": %.1f, \"steps\": %d, \"step_ms_p50\": %.3f, "
      "\"step_gb_s_p50\": %.2f, \"probe_gb_s_p50\": %.2f, \"vs_probe_p25\": %.3f, \"vs_probe_p50\": %.3f, "
      "\"vs_probe_p75\": %.3f, \"fastest_step_vs_probe\": %.3f, \"checksum\": %g}\n",
      dtype.c_str(), parts, bytes / 1e6, steps, 1e3 * quantile(step_s, 0.5), quantile(step_gb_s, 0.5),
      quantile(probe_gb_s, 0.5), quantile(vs_probe, 0.25), quantile(vs_probe, 0.5), quantile(vs_probe, 0.75),
      quantile(step_gb_s, 1.0) / quantile(probe_gb_s, 1.0), static_cast<double>(sink[0]));
  std::free(buffer);
  return 0;
}
