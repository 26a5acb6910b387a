// The model a subcommand uses when --model is not given (docs/behaviour.md, "The bundled model"):
// data/gpt2 when it holds model.safetensors, else the small model that ships with kael.
#pragma once

#include <filesystem>
#include <string>

namespace kael::cli {

// --model's value when given (as is); otherwise data/gpt2 if it holds a model, else the bundled
// model, with one line on stderr naming the one chosen. A directory holding SHA256SUMS (the bundled
// model does) is checked against it first: a damaged file is an error naming it.
std::string resolve_model_dir(const std::string& given);

// The same rule for the commands that need only vocab.json and merges.txt (tokenize, detokenize,
// train): data/gpt2 when it holds them, else the bundled model (GPT-2's own two files, so the same
// ids), with the same stderr line.
std::string resolve_tokenizer_dir(const std::string& given);

// The bundled model's directory: <prefix>/share/kael/models/NAME beside an installed kael, else the
// source tree's models/NAME. Error when neither exists.
std::filesystem::path bundled_model_dir();

// Help of --model / --tokenizer on the subcommands that need only the tokenizer files.
inline constexpr const char* kTokenizerHelp =
    "Directory with vocab.json and merges.txt (default: data/gpt2 when it holds them, else the "
    "bundled model)";

// Help of --model on the subcommands that default to data/gpt2 or the bundled model.
inline constexpr const char* kModelHelp =
    "Directory with model.safetensors, vocab.json, merges.txt (default: data/gpt2 when it holds "
    "model.safetensors, else the bundled model)";

}  // namespace kael::cli
