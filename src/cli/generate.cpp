// `kael generate`: continues a prompt (text or --ids) with the model, streaming the text to
// stdout as it is produced, or printing one JSON object with --json. Timings go to stderr.
// --n N samples N continuations; --beams N runs beam search. Both print every choice when done.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/default_model.hpp"
#include "cli/token_ids.hpp"
#include "kael/core/error.hpp"
#include "kael/generate/beam_search.hpp"
#include "kael/generate/generator.hpp"
#include "kael/model/gpt2.hpp"
#include "kael/text/tokenizer.hpp"

namespace kael::cli {
namespace {

// --n: samples are run one after another, so more would only make a long wait longer.
constexpr int kMaxChoices = 16;

struct GenerateArgs {
  std::string model_dir;  // empty: resolve_model_dir() picks data/gpt2 or the bundled model
  std::string prompt;
  std::string ids;
  generate::GenerateOptions options;
  bool greedy = false;
  bool json = false;
  int threads = 0;
  std::string dtype = "f32";
  int n = 1;
  generate::BeamSearchOptions beams;  // num_beams 1: no beam search
  std::string early_stopping = "false";
  std::vector<std::string> logit_bias;  // "ID=BIAS" items
  CLI::Option* prompt_option = nullptr;
  CLI::Option* ids_option = nullptr;
  std::vector<CLI::Option*> sampling_options;  // meaningless with beam search
};

void write_stdout(std::string_view piece) {
  std::fwrite(piece.data(), 1, piece.size(), stdout);
  std::fflush(stdout);  // the point of streaming: show each piece as it comes
}

// "50256=-100" -> {50256, -100}. ValueError naming the item otherwise; the range is checked
// with the other sampling parameters.
std::pair<std::int32_t, float> parse_bias(const std::string& item) {
  const auto eq = item.find('=');
  const auto bad = [&] {
    return ValueError(str("--logit-bias: '", item, "' is not ID=BIAS (a token id, '=', a number in [-100, 100])"));
  };
  if (eq == std::string::npos) throw bad();
  const auto ids = parse_ids(item.substr(0, eq));
  if (ids.size() != 1) throw bad();
  const std::string value = item.substr(eq + 1);
  std::size_t used = 0;
  float bias = 0.0f;
  try {
    bias = std::stof(value, &used);
  } catch (const std::exception&) {
    throw bad();
  }
  if (used != value.size() || !std::isfinite(bias)) throw bad();
  return {ids[0], bias};
}

// Whether the statistics line (stderr) lands right after the streamed text (stdout): on a
// terminal, or when both go to the same file or pipe (2>&1). Then the text ends its line first.
bool statistics_follow_text() {
  if (isatty(STDOUT_FILENO)) return true;
  struct stat out{}, err{};
  return fstat(STDOUT_FILENO, &out) == 0 && fstat(STDERR_FILENO, &err) == 0 && out.st_dev == err.st_dev &&
         out.st_ino == err.st_ino;
}

// --json has one shape in every mode (one choice, --n, --beams): {"prompt_ids", "choices": [{"ids",
// "text", "finish_reason" [, "score"]}], "ids", "text"}, where the top-level "ids" and "text" are
// the first choice's: the one-choice shape of earlier releases, kept for one release
// (docs/cli.md). Without --json, several choices print each text followed by a line "---".
struct Choice {
  std::vector<std::int32_t> ids;
  std::string text;
  std::string finish_reason;
  std::optional<float> score;  // beam search's length-penalized score
};

void print_choices(const std::vector<std::int32_t>& prompt_ids, const std::vector<Choice>& choices, bool json) {
  if (json) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const Choice& c : choices) {
      nlohmann::ordered_json item = {{"ids", c.ids}, {"text", c.text}, {"finish_reason", c.finish_reason}};
      if (c.score) item["score"] = *c.score;
      list.push_back(std::move(item));
    }
    nlohmann::ordered_json out = {{"prompt_ids", prompt_ids}, {"choices", std::move(list)}};
    out["ids"] = choices.front().ids;
    out["text"] = choices.front().text;
    std::cout << out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
    return;
  }
  for (const Choice& c : choices) {
    write_stdout(c.text);
    write_stdout(c.text.empty() || c.text.back() != '\n' ? "\n---\n" : "---\n");
  }
}

int run_beams(const generate::BeamSearchOptions& beams, const generate::GenerateOptions& generation, bool json,
              const model::GPT2& model, const text::Tokenizer& tokenizer, const std::vector<std::int32_t>& prompt_ids) {
  generate::BeamSearchOptions options = beams;
  options.max_new_tokens = generation.max_new_tokens;
  options.ignore_eos = generation.ignore_eos;
  options.truncate_prompt = generation.truncate_prompt;
  options.no_repeat_ngram_size = generation.sampling.no_repeat_ngram_size;
  options.logit_bias = generation.sampling.logit_bias;
  const auto result = generate::beam_search(model, prompt_ids, options);
  std::vector<Choice> choices;
  for (const auto& h : result.sequences) {
    std::vector<std::int32_t> shown = h.ids;
    if (h.finish_reason == "stop") shown.pop_back();  // <|endoftext|> is not text
    choices.push_back({h.ids, tokenizer.decode(shown), h.finish_reason, h.score});
  }
  print_choices(result.prompt_ids, choices, json);
  std::fprintf(stderr, "prompt: %zu tokens; beam search, %d beams, %d forward steps\n", result.prompt_ids.size(),
               options.num_beams, result.steps);
  return 0;
}

int run_samples(const GenerateArgs& args, const generate::GenerateOptions& options, const model::GPT2& model,
                const text::Tokenizer& tokenizer, const std::vector<std::int32_t>& prompt_ids) {
  std::vector<Choice> choices;
  std::vector<std::int32_t> prompt_seen;
  for (int i = 0; i < args.n; ++i) {
    generate::GenerateOptions one = options;
    one.sampling.seed = options.sampling.seed + static_cast<std::uint64_t>(i);  // choice i: seed + i
    auto result = generate::generate(model, tokenizer, prompt_ids, one);
    prompt_seen = result.prompt_ids;
    choices.push_back({std::move(result.ids), std::move(result.text), result.finish_reason, std::nullopt});
  }
  print_choices(prompt_seen, choices, args.json);
  return 0;
}

int run_generate(const GenerateArgs& args) {
  if (args.prompt_option->count() > 0 && args.ids_option->count() > 0)
    throw ValueError("give either PROMPT or --ids, not both");
  set_threads_option(args.threads);
  if (args.prompt_option->count() == 0 && args.ids_option->count() == 0)
    throw ValueError("nothing to continue: give a PROMPT or --ids");

  generate::GenerateOptions options = args.options;
  if (args.greedy) options.sampling.temperature = 0.0f;
  for (const auto& item : args.logit_bias) {
    const auto [id, bias] = parse_bias(item);
    options.sampling.logit_bias[id] = bias;
  }
  if (args.n < 1) throw ValueError(str("--n must be >= 1, found ", args.n));
  if (args.n > kMaxChoices) throw ValueError(str("--n must be at most ", kMaxChoices, ", found ", args.n));
  const bool beams = args.beams.num_beams != 1;
  if (beams) {
    for (const CLI::Option* option : args.sampling_options)
      if (option->count() > 0)
        throw ValueError(str("--beams does not sample: ", option->get_name(), " cannot be used with it"));
    if (args.n != 1) throw ValueError("--n cannot be used with --beams (use --num-return)");
    if (!args.options.stop.empty()) throw ValueError("--stop is not supported with --beams");
  } else if (args.beams.num_return_sequences != 1 || args.early_stopping != "false" || args.beams.length_penalty != 1.0f) {
    throw ValueError("--num-return, --early-stopping and --length-penalty need --beams N (N >= 2)");
  }
  generate::GenerateOptions checked = options;  // before the (slow) model load
  generate::BeamSearchOptions beam_options = args.beams;
  if (const auto mode = generate::early_stopping_from_name(args.early_stopping))
    beam_options.early_stopping = *mode;
  else
    throw ValueError(str("--early-stopping must be true, false or never, found '", args.early_stopping, "'"));
  beam_options.max_new_tokens = std::max(1, options.max_new_tokens);
  if (beams) beam_options.validate();
  checked.sampling.validate();
  model::LoadOptions load_options;
  load_options.dtype = model::parse_weight_dtype(args.dtype);
  // Read, not mapped: text is printed as it is generated, so a file changed under a mapping
  // could not be reported before the output; read weights never depend on the file again.
  load_options.mmap = false;

  const std::string model_dir = resolve_model_dir(args.model_dir);
  const auto tokenizer = text::Tokenizer::from_directory(model_dir);
  const auto prompt_ids = args.ids_option->count() > 0 ? parse_ids(args.ids) : tokenizer.encode(args.prompt);
  if (prompt_ids.empty()) throw ValueError("the prompt is empty: generation needs at least one prompt token");
  const auto model = model::GPT2::load(model_dir, load_options);
  options.sampling.validate(model.config().vocab_size);  // logit_bias ids against the vocabulary
  if (beams) return run_beams(beam_options, options, args.json, model, tokenizer, prompt_ids);
  if (args.n > 1) return run_samples(args, options, model, tokenizer, prompt_ids);

  generate::PieceCallback on_piece;
  if (!args.json) on_piece = [](std::string_view piece) {
    write_stdout(piece);
    return true;
  };
  const auto result = generate::generate(model, tokenizer, prompt_ids, options, on_piece);

  if (args.json) {
    // Text that ends inside a character (cut by max tokens) is shown with U+FFFD.
    print_choices(result.prompt_ids, {{result.ids, result.text, result.finish_reason, std::nullopt}}, true);
  } else if (statistics_follow_text() && (result.text.empty() || result.text.back() != '\n')) {
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
  cmd->add_option("--model", args->model_dir, kModelHelp);
  args->prompt_option = cmd->add_option("prompt", args->prompt, "Prompt text");
  args->ids_option = cmd->add_option("--ids", args->ids, "Prompt as comma-separated token ids (1,2,3)");
  cmd->add_option("--max-tokens", args->options.max_new_tokens, "Most new tokens")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  auto& sampling_only = args->sampling_options;
  sampling_only.push_back(
      cmd->add_option("--temperature", s.temperature, "Sampling temperature (0 = greedy)")->capture_default_str());
  sampling_only.push_back(
      cmd->add_option("--top-k", s.top_k, "Keep the k most likely tokens (0 = off)")->capture_default_str());
  sampling_only.push_back(cmd->add_option("--top-p", s.top_p, "Nucleus sampling mass (1 = off)")->capture_default_str());
  sampling_only.push_back(
      cmd->add_option("--min-p", s.min_p, "Drop tokens below min-p times the top probability (0 = off)")
          ->capture_default_str());
  sampling_only.push_back(
      cmd->add_option("--repetition-penalty", s.repetition_penalty, "Hugging Face repetition penalty (1 = off)")
          ->capture_default_str());
  sampling_only.push_back(
      cmd->add_option("--presence-penalty", s.presence_penalty, "OpenAI presence penalty")->capture_default_str());
  sampling_only.push_back(
      cmd->add_option("--frequency-penalty", s.frequency_penalty, "OpenAI frequency penalty")->capture_default_str());
  sampling_only.push_back(cmd->add_option("--seed", s.seed, "Random seed (same seed, same text)")->capture_default_str());
  cmd->add_option("--no-repeat-ngram-size", s.no_repeat_ngram_size,
                  "No n-gram of this many tokens occurs twice, prompt included (Hugging Face's rule; 0 = off)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--logit-bias", args->logit_bias,
                  "ID=BIAS (repeatable): add BIAS in [-100, 100] to token ID's logit (OpenAI's logit_bias)")
      ->allow_extra_args(false);
  cmd->add_option("--n", args->n, str("Sample this many continuations (1 .. ", kMaxChoices, "; choice i uses seed + i)"))
      ->capture_default_str();
  args->beams.num_beams = 1;
  cmd->add_option("--beams", args->beams.num_beams, "Beam search with this many beams (1 = off), as transformers' num_beams")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--length-penalty", args->beams.length_penalty,
                  "Beam search: scores are divided by generated length ^ this")
      ->capture_default_str();
  cmd->add_option("--early-stopping", args->early_stopping, "Beam search: true, false or never (as transformers)")
      ->capture_default_str();
  cmd->add_option("--num-return", args->beams.num_return_sequences, "Beam search: sequences to print, best first")
      ->capture_default_str();
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
  cmd->add_flag("--json", args->json, R"(Print {"prompt_ids", "choices": [{"ids", "text", "finish_reason"}], "ids", "text"} instead of streaming)");
  return [args] { return run_generate(*args); };
}

const Registration registration("generate", setup);

}  // namespace
}  // namespace kael::cli
