// `kael generate`: continues a prompt (text or --ids) with the model, streaming the text to
// stdout as it is produced, or printing one JSON object with --json. Timings go to stderr.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/token_ids.hpp"
#include "kael/core/error.hpp"
#include "kael/generate/generator.hpp"
#include "kael/model/gpt2.hpp"
#include "kael/text/tokenizer.hpp"

namespace kael::cli {
namespace {

struct GenerateArgs {
  std::string model_dir = kDefaultModelDir;
  std::string prompt;
  std::string ids;
  generate::GenerateOptions options;
  bool greedy = false;
  bool json = false;
  int threads = 0;
  std::string dtype = "f32";
  CLI::Option* prompt_option = nullptr;
  CLI::Option* ids_option = nullptr;
};

void write_stdout(std::string_view piece) {
  std::fwrite(piece.data(), 1, piece.size(), stdout);
  std::fflush(stdout);  // the point of streaming: show each piece as it comes
}

int run_generate(const GenerateArgs& args) {
  if (args.prompt_option->count() > 0 && args.ids_option->count() > 0)
    throw ValueError("give either PROMPT or --ids, not both");
  set_threads_option(args.threads);
  if (args.prompt_option->count() == 0 && args.ids_option->count() == 0)
    throw ValueError("nothing to continue: give a PROMPT or --ids");

  generate::GenerateOptions options = args.options;
  if (args.greedy) options.sampling.temperature = 0.0f;
  options.sampling.validate();  // before the (slow) model load
  model::LoadOptions load_options;
  load_options.dtype = model::parse_weight_dtype(args.dtype);
  // Read, not mapped: text is printed as it is generated, so a file changed under a mapping
  // could not be reported before the output; read weights never depend on the file again.
  load_options.mmap = false;

  const auto tokenizer = text::Tokenizer::from_directory(args.model_dir);
  const auto prompt_ids = args.ids_option->count() > 0 ? parse_ids(args.ids) : tokenizer.encode(args.prompt);
  if (prompt_ids.empty()) throw ValueError("the prompt is empty: generation needs at least one prompt token");
  const auto model = model::GPT2::load(args.model_dir, load_options);

  generate::PieceCallback on_piece;
  if (!args.json) on_piece = [](std::string_view piece) {
    write_stdout(piece);
    return true;
  };
  const auto result = generate::generate(model, tokenizer, prompt_ids, options, on_piece);

  if (args.json) {
    // Keys in the documented order. Text that ends inside a character (cut by max tokens) is
    // shown with U+FFFD.
    const nlohmann::ordered_json out = {{"prompt_ids", result.prompt_ids}, {"ids", result.ids}, {"text", result.text}};
    std::cout << out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
  } else if (isatty(STDOUT_FILENO) && (result.text.empty() || result.text.back() != '\n')) {
    write_stdout("\n");
  }
  std::cout.flush();

  const auto& t = result.timings;
  std::fprintf(stderr, "prompt: %d tokens, prefill %.1f ms (%.1f tokens/s); generated %zu tokens, %.1f tokens/s; finish: %s\n",
               t.prompt_tokens, t.prefill_ms, t.prefill_tokens_per_second(), result.ids.size(),
               t.decode_tokens_per_second(), result.finish_reason.c_str());
  return 0;
}

RunFn setup(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  auto& s = args->options.sampling;
  s.temperature = 0.8f;
  s.top_k = 40;
  s.seed = 42;
  CLI::App* cmd = app.add_subcommand("generate", "Continue a prompt with the model; text to stdout, timings to stderr");
  cmd->add_option("--model", args->model_dir, "Directory with model.safetensors, vocab.json, merges.txt")
      ->capture_default_str();
  args->prompt_option = cmd->add_option("prompt", args->prompt, "Prompt text");
  args->ids_option = cmd->add_option("--ids", args->ids, "Prompt as comma-separated token ids (1,2,3)");
  cmd->add_option("--max-tokens", args->options.max_new_tokens, "Most new tokens")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--temperature", s.temperature, "Sampling temperature (0 = greedy)")->capture_default_str();
  cmd->add_option("--top-k", s.top_k, "Keep the k most likely tokens (0 = off)")->capture_default_str();
  cmd->add_option("--top-p", s.top_p, "Nucleus sampling mass (1 = off)")->capture_default_str();
  cmd->add_option("--min-p", s.min_p, "Drop tokens below min-p times the top probability (0 = off)")
      ->capture_default_str();
  cmd->add_option("--repetition-penalty", s.repetition_penalty, "Hugging Face repetition penalty (1 = off)")
      ->capture_default_str();
  cmd->add_option("--presence-penalty", s.presence_penalty, "OpenAI presence penalty")->capture_default_str();
  cmd->add_option("--frequency-penalty", s.frequency_penalty, "OpenAI frequency penalty")->capture_default_str();
  cmd->add_option("--seed", s.seed, "Random seed (same seed, same text)")->capture_default_str();
  // One value per --stop, so a stop string never swallows the positional prompt.
  cmd->add_option("--stop", args->options.stop, "Stop string (repeatable); not included in the output")
      ->allow_extra_args(false);
  cmd->add_flag("--greedy", args->greedy, "Always take the most likely token");
  cmd->add_flag("--ignore-eos", args->options.ignore_eos, "Keep generating after <|endoftext|>");
  cmd->add_flag("--truncate", args->options.truncate_prompt,
                "Cut the prompt from the left to fit the context instead of failing");
  cmd->add_option("--threads", args->threads, "Compute threads (0 = one per physical core)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--dtype", args->dtype, kDtypeHelp)->capture_default_str();
  cmd->add_flag("--json", args->json, R"(Print {"prompt_ids", "ids", "text"} instead of streaming)");
  return [args] { return run_generate(*args); };
}

const Registration registration("generate", setup);

}  // namespace
}  // namespace kael::cli
