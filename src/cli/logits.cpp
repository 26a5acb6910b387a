// `kael logits`: the model's next-token logits at the last position of a prompt (text or
// --ids), highest first. --top 0 lists the whole vocabulary, which is what the parity tests
// against transformers read (scripts/gpt2_reference.py).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/default_model.hpp"
#include "cli/token_ids.hpp"
#include "kael/core/error.hpp"
#include "kael/io/safetensors.hpp"
#include "kael/model/gpt2.hpp"
#include "kael/text/tokenizer.hpp"

namespace kael::cli {
namespace {

struct LogitsArgs {
  std::string model_dir;  // empty: resolve_model_dir() picks data/gpt2 or the bundled model
  std::string prompt;
  std::string ids;
  int top = 5;
  int threads = 0;
  bool json = false;
  bool no_mmap = false;
  bool timings = false;
  std::string dtype = "f32";
  CLI::Option* prompt_option = nullptr;
  CLI::Option* ids_option = nullptr;
};

// Ids of the `top` largest logits (all when top is 0), largest first, ties by smaller id.
std::vector<std::int32_t> ranked(std::span<const float> logits, int top) {
  std::vector<std::int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const auto k = top == 0 ? order.size() : std::min<std::size_t>(static_cast<std::size_t>(top), order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                    [&](std::int32_t a, std::int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  order.resize(k);
  return order;
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

int run_logits(const LogitsArgs& args) {
  if (args.prompt_option->count() > 0 && args.ids_option->count() > 0)
    throw ValueError("give either PROMPT or --ids, not both");
  if (args.prompt_option->count() == 0 && args.ids_option->count() == 0)
    throw ValueError("nothing to score: give a PROMPT or --ids");
  set_threads_option(args.threads);
  const model::WeightDType dtype = model::parse_weight_dtype(args.dtype);  // before the slow parts

  const std::string model_dir = resolve_model_dir(args.model_dir);
  const auto tokenizer = text::Tokenizer::from_directory(model_dir);
  const auto ids = args.ids_option->count() > 0 ? parse_ids(args.ids) : tokenizer.encode(args.prompt);
  if (ids.empty()) throw ValueError("the prompt is empty: logits need at least one token");

  const auto start = std::chrono::steady_clock::now();
  model::LoadOptions options;
  options.mmap = !args.no_mmap;
  options.dtype = dtype;
  const auto model = model::GPT2::load(model_dir, options);
  const double load_ms = ms_since(start);
  auto session = model.new_session();
  const auto forward_start = std::chrono::steady_clock::now();
  const auto logits = model.forward(session, ids);
  const double forward_ms = ms_since(forward_start);
  io::check_mappings_intact(str("'", model_dir, "/model.safetensors'"));
  const auto order = ranked(logits, args.top);

  // The decoded token may end inside a UTF-8 character; JSON shows that as U+FFFD.
  const auto token_text = [&](std::int32_t id) {
    return id < static_cast<std::int32_t>(tokenizer.vocabulary_size()) ? std::string(tokenizer.token_bytes(id))
                                                                         : std::string();
  };
  if (args.json) {
    nlohmann::json top = nlohmann::json::array();
    for (std::int32_t id : order)
      top.push_back({{"id", id}, {"token", token_text(id)}, {"logit", static_cast<double>(logits[id])}});
    const nlohmann::json out = {{"ids", ids}, {"top", std::move(top)}};
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    for (std::int32_t id : order) {
      const std::string shown = nlohmann::json(token_text(id)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      std::printf("%8d %16.9g  %s\n", id, static_cast<double>(logits[id]), shown.c_str());
    }
  }
  std::cout.flush();
  std::fflush(stdout);
  if (args.timings)
    std::fprintf(stderr, "load %.1f ms; forward of %zu tokens %.1f ms (%.1f tokens/s) on %d threads\n", load_ms,
                 ids.size(), forward_ms, 1000.0 * static_cast<double>(ids.size()) / forward_ms, model::num_threads());
  return 0;
}

RunFn setup(CLI::App& app) {
  auto args = std::make_shared<LogitsArgs>();
  CLI::App* cmd = app.add_subcommand("logits", "Next-token logits at the last position of a prompt, highest first");
  cmd->add_option("--model", args->model_dir, kModelHelp);
  args->prompt_option = cmd->add_option("prompt", args->prompt, "Prompt text");
  args->ids_option = cmd->add_option("--ids", args->ids, "Prompt as comma-separated token ids (1,2,3)");
  cmd->add_option("--top", args->top, "How many logits to list; 0 lists the whole vocabulary")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", args->json, R"(Print {"ids": [...], "top": [{"id", "token", "logit"}]})");
  cmd->add_option("--threads", args->threads, "Compute threads (0 = one per physical core)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-mmap", args->no_mmap, "Read the weights into memory instead of mapping the file");
  cmd->add_option("--dtype", args->dtype, kDtypeHelp)->capture_default_str();
  cmd->add_flag("--timings", args->timings, "Print load and forward times to stderr");
  return [args] { return run_logits(*args); };
}

const Registration registration("logits", setup);

}  // namespace
}  // namespace kael::cli
