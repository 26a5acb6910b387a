// The book's pipeline (nn::GPT + nn::generate, the tensor library with its KV cache) against the
// engine (model::GPT2, what `kael generate` runs) on one F32 GPT-2 checkpoint: greedy decoding at
// batch 1 from the same prompt, both in this process on the same threads. Each side's time per
// token is its whole generation (the prompt's pass and every step) over the new tokens, the best
// of `repeats` runs taken in turns; the tokens must be the same, or the program says so and
// exits 1. nn's first run also packs the weights for inference (nn::Linear keeps them packed
// after, as the engine packs them at load): nn_first_ms_per_token is that run.
// Prints one JSON line:
//   {"threads", "prompt", "tokens", "nn_ms_per_token", "engine_ms_per_token", "nn_over_engine", "same_tokens",
//    "nn_first_ms_per_token"}
// Usage: nn_generate MODEL_DIR [threads] [tokens, default 60] [repeats, default 3]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "kael/model/gpt2.hpp"
#include "kael/nn/generate.hpp"
#include "kael/nn/gpt2_config.hpp"
#include "kael/nn/gpt2_weights.hpp"
#include "kael/tensor/ops.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: nn_generate MODEL_DIR [threads] [tokens] [repeats]\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  const int threads = argc > 2 ? std::atoi(argv[2]) : 0;
  const std::int64_t tokens = argc > 3 ? std::atoll(argv[3]) : 60;
  const int repeats = argc > 4 ? std::max(1, std::atoi(argv[4])) : 3;
  kael::model::set_num_threads(threads);
  kael::set_num_threads(threads);

  const auto engine = kael::model::GPT2::load(dir);
  const kael::model::Config& c = engine.config();
  kael::nn::GPT book(kael::nn::gpt_config(c));
  kael::nn::load_gpt2_weights(book, dir / "model.safetensors");
  book.eval();

  std::vector<std::int32_t> prompt(16);
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<std::int32_t>(i * 997 % c.vocab_size);

  const auto argmax = [](std::span<const float> l) {
    return static_cast<std::int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
  };
  const kael::Tensor prompt_ids =
      kael::from_vector(std::vector<std::int64_t>(prompt.begin(), prompt.end()), {1, static_cast<std::int64_t>(prompt.size())});
  std::vector<std::int64_t> engine_ids, book_ids;
  const auto run_engine = [&] {
    auto session = engine.new_session();
    std::vector<std::int64_t> ids(prompt.begin(), prompt.end());
    std::int32_t next = argmax(engine.forward(session, prompt));
    for (std::int64_t t = 0; t < tokens; ++t) {
      ids.push_back(next);
      if (t + 1 < tokens) next = argmax(engine.forward(session, std::span(&next, 1)));
    }
    engine_ids = ids;
  };
  const auto run_book = [&] {
    book_ids = kael::nn::generate(book, prompt_ids, {.max_new_tokens = tokens, .temperature = 0}).to_vector<std::int64_t>();
  };
  // Taken in turns, so that a busy host slows both alike; the best run of each.
  double engine_best = 1e30, book_best = 1e30, book_first = 0;
  for (int r = 0; r < repeats; ++r) {
    auto start = Clock::now();
    run_engine();
    engine_best = std::min(engine_best, seconds_since(start));
    start = Clock::now();
    run_book();
    const double book_seconds = seconds_since(start);
    if (r == 0) book_first = book_seconds;
    book_best = std::min(book_best, book_seconds);
  }

  const bool same = book_ids == engine_ids;
  const double n = static_cast<double>(tokens);
  std::printf(
      "{\"threads\": %d, \"prompt\": %zu, \"tokens\": %lld, \"nn_ms_per_token\": %.2f, \"engine_ms_per_token\": %.2f, "
      "\"nn_over_engine\": %.3f, \"same_tokens\": %s, \"nn_first_ms_per_token\": %.2f}\n",
      kael::model::num_threads(), prompt.size(), static_cast<long long>(tokens), 1e3 * book_best / n,
      1e3 * engine_best / n, book_best / engine_best, same ? "true" : "false", 1e3 * book_first / n);
  if (!same) {
    std::fprintf(stderr, "nn_generate: the two pipelines' tokens differ\n");
    return 1;
  }
  return 0;
}
