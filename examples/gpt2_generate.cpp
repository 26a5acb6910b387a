// Text generation with GPT-2 on the tensor library, as the book's chapter "Loading GPT-2" runs
// it: text::BpeTokenizer, nn::GPT, nn::load_gpt2_weights, nn::generate. Public API only.
//
//   cmake -S . -B build -DKAEL_BUILD_EXAMPLES=ON && cmake --build build --target gpt2_generate
//   build/examples/gpt2_generate "The meaning of life is" --tokens 60 --data data/gpt2
//
// The prompt and its continuation go to stdout, the speed to stderr, so the text pipes cleanly.
// The engine's kael::Model does the same job faster (quantized weights, batching); this example
// shows the library a reader builds models with. Against an installed kael this directory builds
// on its own: cmake -S examples -B build-ex -DCMAKE_PREFIX_PATH=PREFIX.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "kael/kael.hpp"

namespace {

struct Options {
  std::string prompt = "The meaning of life is";
  std::int64_t tokens = 60;
  double temperature = 0.8;  // 0: greedy
  std::int64_t top_k = 40;   // 0: every token
  std::uint64_t seed = 42;
  std::filesystem::path directory = "data/gpt2";
  std::string device = "cpu";
  int threads = 0;  // 0: one per physical core
};

// GPT-2 small, the chapter's model, unless a config.json beside the weights gives another shape
// (the other GPT-2 sizes, or a small checkpoint of one's own).
kael::nn::GptConfig config_of(const std::filesystem::path& directory) {
  if (!std::filesystem::exists(directory / "config.json")) return kael::nn::GptConfig::gpt2_small();
  return kael::nn::gpt_config(kael::model::Config::from_json_file(directory / "config.json"));
}

int run(const Options& options) {
  const kael::Device device = kael::parse_device(options.device);  // before the weights load
  kael::set_num_threads(options.threads);

  const kael::text::BpeTokenizer tokenizer(options.directory / "vocab.json", options.directory / "merges.txt");
  kael::nn::GPT model(config_of(options.directory));
  kael::nn::load_gpt2_weights(model, options.directory / "model.safetensors");
  model.to(device);
  model.eval();

  const std::vector<std::int64_t> ids = tokenizer.encode(options.prompt);
  const auto length = static_cast<std::int64_t>(ids.size());
  const kael::Tensor prompt = kael::from_vector<std::int64_t>(ids, {1, length}).to(device);

  // Seeded after the model is built, so its random initialization does not shift the draws.
  kael::manual_seed(options.seed);
  const auto started = std::chrono::steady_clock::now();
  const kael::Tensor output = kael::nn::generate(
      model, prompt, {.max_new_tokens = options.tokens, .temperature = options.temperature, .top_k = options.top_k});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  // The text is the prompt and its continuation up to <|endoftext|>, as the CLI prints it.
  std::vector<std::int64_t> text_ids = output.select(0, 0).to_vector<std::int64_t>();
  const auto end_of_text = std::find(text_ids.begin() + length, text_ids.end(), kael::text::kEndOfText);
  text_ids.erase(end_of_text, text_ids.end());
  std::cout << tokenizer.decode(text_ids) << "\n" << std::flush;
  const auto generated = static_cast<double>(output.size(1) - length);
  std::fprintf(stderr, "%.0f tokens in %.2f s: %.1f tokens/s\n", generated, seconds,
               seconds > 0 ? generated / seconds : 0.0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{"Generate text with GPT-2 on kael's tensor library (kael::nn::GPT)"};
  app.add_option("prompt", options.prompt, "Text to continue")->capture_default_str();
  app.add_option("--tokens", options.tokens, "New tokens to generate")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--temperature", options.temperature, "Sampling temperature (0 = greedy)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--top-k", options.top_k, "Sample from the k most likely tokens (0 = all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--seed", options.seed, "Random seed (same seed, same text)")->capture_default_str();
  app.add_option("--data", options.directory, "Directory with model.safetensors, vocab.json, merges.txt")
      ->capture_default_str();
  app.add_option("--device", options.device, "cpu, or cuda (a build with CUDA only)")->capture_default_str();
  app.add_option("--threads", options.threads, "Compute threads (0 = one per physical core)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);  // --help prints and exits 0; an unknown option or a missing value exits 1
  }
  try {
    return run(options);
  } catch (const std::exception& e) {
    std::cout.flush();
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
