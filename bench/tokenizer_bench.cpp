// Encodes text files with the GPT-2 tokenizer on one thread and prints the throughput as JSON.
// Each round loads a fresh tokenizer (untimed), so every round starts with an empty word cache
// and no round profits from having seen the text before.
//
//   tokenizer_bench [--model DIR] [--rounds N] FILE...
//   {"bytes": ..., "tokens": ..., "rounds_mb_s": [...], "best_mb_s": ..., "median_mb_s": ...}
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "kael/core/error.hpp"
#include "kael/text/tokenizer.hpp"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw kael::Error("cannot open " + path);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return std::move(bytes).str();
}

int run(int argc, char** argv) {
  std::string model = "models/kael-tiny-kjv";  // GPT-2's vocab.json and merges.txt, from the root
  int rounds = 5;
  std::vector<std::string> texts;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--model" && i + 1 < argc) {
      model = argv[++i];
    } else if (arg == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else if (arg.starts_with("--")) {
      throw kael::ValueError("unknown option " + arg + " (usage: tokenizer_bench [--model DIR] [--rounds N] FILE...)");
    } else {
      texts.push_back(read_file(arg));
    }
  }
  if (texts.empty()) throw kael::ValueError("no input files (usage: tokenizer_bench [--model DIR] [--rounds N] FILE...)");

  std::size_t bytes = 0;
  for (const std::string& text : texts) bytes += text.size();
  std::vector<double> mb_s;
  std::size_t tokens = 0;
  for (int round = 0; round < rounds; ++round) {
    const auto tokenizer = kael::text::Tokenizer::from_directory(model);
    tokens = 0;
    const auto start = std::chrono::steady_clock::now();
    for (const std::string& text : texts) tokens += tokenizer.encode(text).size();
    const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
    mb_s.push_back(static_cast<double>(bytes) / 1e6 / seconds.count());
  }
  std::vector<double> sorted = mb_s;
  std::sort(sorted.begin(), sorted.end());
  std::printf("{\"bytes\": %zu, \"tokens\": %zu, \"rounds_mb_s\": [", bytes, tokens);
  for (std::size_t i = 0; i < mb_s.size(); ++i) std::printf("%s%.3f", i ? ", " : "", mb_s[i]);
  std::printf("], \"best_mb_s\": %.3f, \"median_mb_s\": %.3f}\n", sorted.back(), sorted[sorted.size() / 2]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
