// Text generation with GPT-2 from C++, through kael's public API only (kael/kael.hpp).
//
//   cmake -S . -B build -DKAEL_BUILD_EXAMPLES=ON && cmake --build build --target gpt2_generate
//   build/examples/gpt2_generate "The meaning of life is" --tokens 60 --data data/gpt2
//
// The prompt and its continuation go to stdout, the speed to stderr. Against an installed kael
// this directory builds on its own: cmake -S examples -B build-ex -DCMAKE_PREFIX_PATH=PREFIX.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

#include "kael/kael.hpp"

namespace {

struct Args {
  std::string prompt = "The meaning of life is";
  int tokens = 60;
  float temperature = 0.8f;
  int top_k = 40;
  std::uint64_t seed = 42;
  std::string data = "data/gpt2";
  std::string device = "cpu";
  int threads = 0;
};

int run(const Args& args) {
  kael::LoadOptions load;
  load.device = args.device;
  load.threads = args.threads;
  const kael::Model model = kael::Model::load(args.data, load);

  kael::GenerateOptions options;
  options.max_new_tokens = args.tokens;
  options.sampling.temperature = args.temperature;  // 0: greedy
  options.sampling.top_k = args.top_k;
  options.sampling.seed = args.seed;

  std::cout << args.prompt << std::flush;
  const auto start = std::chrono::steady_clock::now();
  const kael::GenerateResult result = model.generate(args.prompt, options, [](std::string_view piece) {
    std::cout << piece << std::flush;
    return true;
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "\n";
  std::fprintf(stderr, "%zu tokens in %.2f s: %.1f tokens/s (decode alone: %.1f tokens/s)\n", result.ids.size(),
               seconds, seconds > 0 ? result.ids.size() / seconds : 0.0, result.timings.decode_tokens_per_second());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  CLI::App app{"Generate text with GPT-2 through kael's C++ API (kael " + std::string(kael::version()) + ")"};
  app.add_option("prompt", args.prompt, "Text to continue")->capture_default_str();
  app.add_option("--tokens", args.tokens, "New tokens to generate")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--temperature", args.temperature, "Sampling temperature (0 = greedy)")->capture_default_str();
  app.add_option("--top-k", args.top_k, "Sample from the k most likely tokens (0 = all)")->capture_default_str();
  app.add_option("--seed", args.seed, "Random seed (same seed, same text)")->capture_default_str();
  app.add_option("--data", args.data, "Directory with model.safetensors, vocab.json, merges.txt")->capture_default_str();
  app.add_option("--device", args.device, "Device to run on (this build: cpu)")->capture_default_str();
  app.add_option("--threads", args.threads, "Compute threads (0 = one per physical core)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);  // --help prints and exits 0; an unknown option or a missing value exits 1
  }
  try {
    return run(args);
  } catch (const std::exception& e) {
    std::cout.flush();
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
