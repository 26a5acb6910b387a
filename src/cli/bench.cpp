// `kael bench`: times a model on seeded random prompts: prefill, then greedy decode of one
// or several sequences at once (forward_batch), with per-step latency, peak memory and the
// time spent in each part of the forward pass. Speed does not depend on the weights' values,
// so any checkpoint works, a seeded random one included. --json prints one object.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/default_model.hpp"
#include "kael/core/cpu_clock.hpp"
#include "kael/core/error.hpp"
#include "kael/core/peak_memory.hpp"
#include "kael/model/gpt2.hpp"

namespace kael::cli {
namespace {

struct BenchArgs {
  std::string model_dir;  // empty: resolve_model_dir() picks data/gpt2 or the bundled model
  int prompt_tokens = 16;
  int max_tokens = 128;
  int batch = 1;
  int threads = 0;
  unsigned seed = 1;
  int warmup = 1;  // untimed rounds (a prefill and one decode step) before the timed one
  bool json = false;
  bool thread_busy = false;
  std::string dtype = "f32";
};

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// CPU time of the whole process (all threads), in ms: with wall time it shows how much of the
// machine the run had, on a host shared with other work.
double process_cpu_ms() { return 1e3 * process_cpu_seconds(); }

// CPU time of the calling thread, in ms.
double thread_cpu_ms() { return 1e3 * thread_cpu_seconds(); }

// Page faults the process has taken so far (minor and major): a prefill into fresh memory
// takes one per page it first writes.
long page_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt + usage.ru_majflt;
}

double peak_rss_mb() { return static_cast<double>(peak_rss_bytes()) / 1e6; }

// The q-quantile (0..1) of `values` by the nearest-rank method.
double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(std::max(0.0, std::ceil(q * static_cast<double>(values.size())) - 1));
  return values[std::min(rank, values.size() - 1)];
}

std::int32_t argmax(std::span<const float> logits) {
  return static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

nlohmann::json busy_json(const ThreadBusy& b) {
  return {{"calls", b.calls},
          {"serial_calls", b.serial_calls},
          {"serial_cpu_ms", b.serial_cpu_ms},
          {"task_cpu_ms", b.task_cpu_ms},
          {"imbalance", b.imbalance()},
          {"caller_wait_cpu_ms", b.caller_wait_cpu_ms},
          {"worker_idle_cpu_ms", b.worker_idle_cpu_ms},
          {"caller_wait_ms", b.caller_wait_ms},
          {"worker_start_ms", b.worker_start_ms},
          {"parts", b.parts},
          {"serial_ms", b.serial_ms},
          {"serial_idle_ms", b.serial_idle_ms},
          {"sync_ms", b.sync_ms()}};
}

// Per part of the forward pass: the thread pool's counts (ThreadBusy), and the calling
// thread's CPU outside any parallel call (`main_cpu_ms` is its whole CPU time over the passes).
// sync_fraction: the threads' time starting, waiting at joins and idle beside serial calls
// (ThreadBusy::sync_ms) over the threads' time in the passes, threads x `wall_ms`.
nlohmann::json thread_busy_json(const model::ForwardProfile& p, double main_cpu_ms, double wall_ms, int threads) {
  ThreadBusy all;
  nlohmann::json out;
  for (const auto& [name, b] : {std::pair{"attention", &p.attention_threads}, {"mlp", &p.mlp_threads},
                                {"layer_norm", &p.layer_norm_threads}, {"logits", &p.logits_threads},
                                {"other", &p.other_threads}}) {
    out[name] = busy_json(*b);
    all += *b;
  }
  out["total"] = busy_json(all);
  const double caller_share_ms = all.task_cpu_ms.empty() ? 0.0 : all.task_cpu_ms[0];
  const double caller_in_calls = caller_share_ms + all.serial_cpu_ms + all.caller_wait_cpu_ms;
  out["main_thread_cpu_ms"] = main_cpu_ms;
  out["main_thread_outside_calls_cpu_ms"] = main_cpu_ms - caller_in_calls;
  out["sync_fraction"] = wall_ms > 0 ? all.sync_ms() / (threads * wall_ms) : 0.0;
  return out;
}

nlohmann::json breakdown(const model::ForwardProfile& p) {
  return {{"attention", p.attention_ms}, {"mlp", p.mlp_ms},  {"layer_norm", p.layer_norm_ms},
          {"logits", p.logits_ms},       {"other", p.other_ms()}, {"total", p.total_ms}};
}

int run_bench(const BenchArgs& args) {
  if (args.prompt_tokens < 1) throw ValueError(str("--prompt-tokens must be at least 1, found ", args.prompt_tokens));
  if (args.max_tokens < 1) throw ValueError(str("--max-tokens must be at least 1, found ", args.max_tokens));
  if (args.batch < 1) throw ValueError(str("--batch must be at least 1, found ", args.batch));
  if (args.threads < 0) throw ValueError(str("--threads must be >= 0 (0 = one per core), found ", args.threads));
  if (args.warmup < 0) throw ValueError(str("--warmup must be >= 0, found ", args.warmup));
  model::LoadOptions load_options;
  load_options.dtype = model::parse_weight_dtype(args.dtype);
  set_threads_option(args.threads);
  model::count_thread_busy(args.thread_busy);

  const std::string model_dir = resolve_model_dir(args.model_dir);
  const auto load_start = Clock::now();
  const auto model = model::GPT2::load(model_dir, load_options);
  const double load_ms = ms_since(load_start);
  const model::Config& config = model.config();
  if (args.prompt_tokens + args.max_tokens > config.n_positions)
    throw ValueError(str("--prompt-tokens ", args.prompt_tokens, " + --max-tokens ", args.max_tokens,
                         " exceeds the model's context of ", config.n_positions, " positions"));

  // Each sequence gets its own seeded random prompt.
  std::mt19937 rng(args.seed);
  std::uniform_int_distribution<std::int32_t> any_token(0, config.vocab_size - 1);
  const auto batch = static_cast<std::size_t>(args.batch);
  std::vector<model::Session> sessions;
  std::vector<std::vector<std::int32_t>> prompts(batch);
  for (auto& prompt : prompts)
    for (int i = 0; i < args.prompt_tokens; ++i) prompt.push_back(any_token(rng));
  for (std::size_t b = 0; b < batch; ++b) sessions.push_back(model.new_session());
  std::vector<model::Session*> pointers;
  for (auto& s : sessions) pointers.push_back(&s);
  // One greedy decode step: each sequence's token in `tokens` becomes its next one. One sequence
  // goes through forward(), as `kael generate` does; several through one forward_batch().
  const auto decode_step = [&](std::vector<std::int32_t>& tokens) {
    if (batch == 1) {
      tokens[0] = argmax(model.forward(sessions[0], std::span(tokens.data(), 1)));
    } else {
      const auto logits = model.forward_batch(pointers, tokens);
      for (std::size_t b = 0; b < batch; ++b) tokens[b] = argmax(logits[b]);
    }
  };

  // Warm-up rounds on other seeded prompts, then each session forgets them: the timed prefill
  // and decode then write KV blocks and scratch the process has already touched, as a server's
  // do, and as the peers in bench/compare.py are measured after theirs. The first-touch page
  // faults (the kernel zeroing each fresh page) and the threads' first wake-up stay out of the
  // figures. The warm-up prompt is as long as the timed prompt and decode together, so that every
  // position the timed run holds has its key/value memory touched (decode_page_faults).
  std::vector<std::int32_t> warm_prompt(static_cast<std::size_t>(args.prompt_tokens + args.max_tokens - 1));
  std::vector<std::int32_t> warm_next(batch);
  for (int round = 0; round < args.warmup; ++round) {
    for (auto& t : warm_prompt) t = any_token(rng);
    for (std::size_t b = 0; b < batch; ++b) warm_next[b] = argmax(model.forward(sessions[b], warm_prompt));
    decode_step(warm_next);
    for (auto& s : sessions) s.reset();
  }

  // Prefill, one sequence after another (each prompt is already a matrix product).
  model::ForwardProfile prefill_profile, decode_profile;
  std::vector<std::int32_t> next(batch);
  const auto prefill_start = Clock::now();
  const double prefill_cpu_start = process_cpu_ms();
  const double prefill_main_cpu_start = thread_cpu_ms();
  const long prefill_faults_start = page_faults();
  for (std::size_t b = 0; b < batch; ++b) {
    sessions[b].set_profile(&prefill_profile);
    next[b] = argmax(model.forward(sessions[b], prompts[b]));
    sessions[b].set_profile(&decode_profile);
  }
  const double prefill_ms = ms_since(prefill_start);
  const double prefill_cpu_ms = process_cpu_ms() - prefill_cpu_start;
  const double prefill_main_cpu_ms = thread_cpu_ms() - prefill_main_cpu_start;
  const long prefill_page_faults = page_faults() - prefill_faults_start;

  // Decode: every step feeds each sequence its last greedy token.
  std::vector<double> step_ms;
  const double decode_cpu_start = process_cpu_ms();
  const double decode_main_cpu_start = thread_cpu_ms();
  const long decode_faults_start = page_faults();
  const auto decode_start = Clock::now();
  for (int step = 0; step < args.max_tokens; ++step) {
    const auto step_start = Clock::now();
    decode_step(next);
    step_ms.push_back(ms_since(step_start));
  }
  const double decode_ms = ms_since(decode_start);
  const double decode_cpu_ms = process_cpu_ms() - decode_cpu_start;
  const double decode_main_cpu_ms = thread_cpu_ms() - decode_main_cpu_start;
  const long decode_page_faults = page_faults() - decode_faults_start;

  const double generated = static_cast<double>(batch) * args.max_tokens;
  double mean = 0;
  for (double v : step_ms) mean += v / static_cast<double>(step_ms.size());
  const double weights_mb = static_cast<double>(model.parameter_count()) * sizeof(float) / 1e6;
  nlohmann::json out = {
      {"prompt_tokens", args.prompt_tokens * args.batch},
      {"generated_tokens", static_cast<std::int64_t>(generated)},
      {"batch", args.batch},
      {"prefill_ms", prefill_ms},
      {"prefill_tok_s", 1e3 * args.prompt_tokens * args.batch / prefill_ms},
      {"prefill_cpu_ms", prefill_cpu_ms},
      {"prefill_page_faults", prefill_page_faults},
      {"warmup", args.warmup},
      {"decode_ms", decode_ms},
      {"decode_cpu_ms", decode_cpu_ms},
      {"decode_page_faults", decode_page_faults},
      {"decode_tok_s", 1e3 * generated / decode_ms},
      {"latency_ms",
       {{"mean", mean}, {"min", quantile(step_ms, 0.0)}, {"p50", quantile(step_ms, 0.5)}, {"p95", quantile(step_ms, 0.95)}}},
      {"peak_rss_mb", peak_rss_mb()},
      {"threads", model::num_threads()},
      {"isa", model::kernel_isa()},
      {"int8_dot", model::int8_dot()},
      {"dtype", args.dtype},
      {"weights_mb", weights_mb},
      {"load_ms", load_ms},
      {"breakdown_ms", breakdown(decode_profile)},
      {"prefill_breakdown_ms", breakdown(prefill_profile)},
  };
  if (args.thread_busy) {
    const int threads = model::num_threads();
    out["prefill_thread_busy"] = thread_busy_json(prefill_profile, prefill_main_cpu_ms, prefill_ms, threads);
    out["decode_thread_busy"] = thread_busy_json(decode_profile, decode_main_cpu_ms, decode_ms, threads);
  }
  if (args.json) {
    std::cout << out.dump() << "\n";
    return 0;
  }
  const auto& b = out["breakdown_ms"];
  std::printf("model        %s (%.1f MB as F32, stored as %s, loaded in %.0f ms)\n", model_dir.c_str(),
              weights_mb, args.dtype.c_str(), load_ms);
  const std::string int8_dot = args.dtype == "int8" ? str(", ", model::int8_dot(), " int8 dot") : "";
  std::printf("threads      %d (%s kernels%s)\n", model::num_threads(), model::kernel_isa(), int8_dot.c_str());
  std::printf("prefill      %d x %d tokens in %.1f ms (%.1f tokens/s)\n", args.batch, args.prompt_tokens, prefill_ms,
              out["prefill_tok_s"].get<double>());
  std::printf("decode       %d x %d tokens in %.1f ms: %.1f tokens/s\n", args.batch, args.max_tokens, decode_ms,
              out["decode_tok_s"].get<double>());
  std::printf("latency      mean %.2f ms, p50 %.2f ms, p95 %.2f ms per step\n", mean, quantile(step_ms, 0.5),
              quantile(step_ms, 0.95));
  std::printf("breakdown    attention %.1f, mlp %.1f, layer_norm %.1f, logits %.1f, other %.1f ms (decode)\n",
              b["attention"].get<double>(), b["mlp"].get<double>(), b["layer_norm"].get<double>(),
              b["logits"].get<double>(), b["other"].get<double>());
  if (args.thread_busy) {
    const auto& d = out["decode_thread_busy"];
    const auto& t = d["total"];
    const double steps = args.max_tokens;
    std::printf("sync         %.1f%% of the decode threads' time: per step %.1f parallel calls, %.1f serial; "
                "starting %.3f, joins %.3f, beside serial calls %.3f ms (thread-ms)\n",
                100 * d["sync_fraction"].get<double>(), t["calls"].get<double>() / steps,
                t["serial_calls"].get<double>() / steps, t["worker_start_ms"].get<double>() / steps,
                t["caller_wait_ms"].get<double>() / steps, t["serial_idle_ms"].get<double>() / steps);
  }
  std::printf("peak RSS     %.1f MB\n", peak_rss_mb());
  return 0;
}

RunFn setup(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "Time prefill and greedy decode on seeded random prompts");
  cmd->add_option("--model", args->model_dir, kModelHelp);
  cmd->add_option("--prompt-tokens", args->prompt_tokens, "Prompt length per sequence")->capture_default_str();
  cmd->add_option("--max-tokens", args->max_tokens, "Tokens generated per sequence")->capture_default_str();
  cmd->add_option("--batch", args->batch, "Sequences decoded together in one forward pass")->capture_default_str();
  cmd->add_option("--threads", args->threads, "Compute threads (0 = one per physical core)")->capture_default_str();
  cmd->add_option("--seed", args->seed, "Seed of the random prompts")->capture_default_str();
  cmd->add_option("--dtype", args->dtype, kDtypeHelp)->capture_default_str();
  cmd->add_option("--warmup", args->warmup,
                  "Untimed rounds (a prefill of another seeded prompt and one decode step) before the timed "
                  "one; 0 times a cold first prefill")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->add_flag("--thread-busy", args->thread_busy,
                "Count each compute thread's CPU time per part of the prefill and of decode (prefill_thread_busy and "
                "decode_thread_busy in --json), and the synchronisation cost: the threads' time starting, waiting at "
                "joins and idle beside serial calls, as a fraction of their time in the steps (sync_fraction)");
  return [args] { return run_bench(*args); };
}

const Registration registration("bench", setup);

}  // namespace
}  // namespace kael::cli
