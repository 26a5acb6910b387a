// How subcommands join the `kael` command line: each src/cli/<name>.cpp defines a setup
// function that adds its CLI11 subcommand and returns what to run when it is chosen, and
// registers it with a static `Registration`. main() knows no subcommand by name.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace kael::cli {

// Runs the chosen subcommand after parsing; returns the process exit code.
using RunFn = std::function<int()>;
// Adds one subcommand to `app` and returns its run function. Option storage must be owned
// by the returned function (capture a shared_ptr), since it runs after setup returns.
using SetupFn = RunFn (*)(CLI::App& app);

struct Registration {
  Registration(std::string name, SetupFn setup);
};

struct RegisteredCommand {
  std::string name;
  SetupFn setup;
};
std::vector<RegisteredCommand>& registry();

// --model's default for tokenize, detokenize and finetune; generate, logits, bench and serve try it
// first and fall back to the bundled model (cli/default_model.hpp).
inline constexpr const char* kDefaultModelDir = "data/gpt2";
// Help of --dtype, on every subcommand that loads a model.
inline constexpr const char* kDtypeHelp =
    "Weight storage, converted at load: f32, f16 (half the bytes), int8 (int8 matrix products; a scale "
    "per 32 weights, or per output column on AMX) or bf16 (needs AVX512-BF16; AMX tiles where usable)";

// model::set_num_threads for --threads, with a warning on stderr when the request is above
// model::max_threads() and was capped.
void set_threads_option(int requested);

}  // namespace kael::cli
