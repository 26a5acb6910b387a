// book_pipeline DIR [TEMPERATURE]: the book's C++ generation pipeline (tokenizer, nn::GPT of GPT-2
// small's shape, load_gpt2_weights, to(device), from_vector, manual_seed, nn::generate, decode)
// against the installed kael, with the chapter's names and signatures. Prints the text.
// tests/python/test_install.py runs it on a seeded checkpoint of GPT-2 small's shape.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "kael/kael.hpp"

namespace {

struct Options {
  std::filesystem::path directory;
  std::string prompt = "The meaning of life is";
  std::int64_t tokens = 12;
  double temperature = 0.8;
  std::int64_t top_k = 40;
  std::uint64_t seed = 42;
  kael::Device device = kael::parse_device("cpu");
};

void run(const Options& options) {
  const kael::text::BpeTokenizer tokenizer(options.directory / "vocab.json", options.directory / "merges.txt");
  kael::nn::GPT model(kael::nn::GptConfig::gpt2_small());
  kael::nn::load_gpt2_weights(model, options.directory / "model.safetensors");
  model.to(options.device);
  model.eval();

  const std::vector<std::int64_t> ids = tokenizer.encode(options.prompt);
  const auto length = static_cast<std::int64_t>(ids.size());
  const kael::Tensor prompt = kael::from_vector<std::int64_t>(ids, {1, length}).to(options.device);

  kael::manual_seed(options.seed);
  const auto started = std::chrono::steady_clock::now();
  const kael::Tensor output = kael::nn::generate(
      model, prompt, {.max_new_tokens = options.tokens, .temperature = options.temperature, .top_k = options.top_k});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  std::cout << tokenizer.decode(output.select(0, 0).to_vector<std::int64_t>()) << "\n";
  std::cerr << options.tokens / seconds << " tokens/s\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::cerr << "usage: book_pipeline DIR [TEMPERATURE]\n";
    return 2;
  }
  try {
    Options options;
    options.directory = argv[1];
    if (argc == 3) options.temperature = std::stod(argv[2]);
    run(options);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
