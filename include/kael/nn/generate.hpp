// nn::generate: the book's sampling loop on nn::GPT, with a KV cache.
#pragma once

#include <cstdint>

#include "kael/nn/gpt.hpp"

namespace kael::nn {

struct GenerateOptions {
  std::int64_t max_new_tokens = 60;
  double temperature = 1.0;  // 0: greedy (argmax)
  std::int64_t top_k = 0;    // sample among the k most likely tokens; 0: all of them
};

// prompt (B, T) integer ids -> (B, T + max_new_tokens): the prompt, then tokens drawn one at a
// time from softmax(logits / temperature) restricted to the top_k (a logit tied with the k-th
// kept), by the engine's sampler (kael/generate/sampling.hpp) of each sequence, seeded from the
// process-wide generator (kael::manual_seed). Runs under NoGradGuard, feeding the model only
// the new token after the prompt, with the KV cache's room for every position reserved at once.
// ValueError for an empty prompt, a length past the model's context, negative options.
Tensor generate(GPT& model, const Tensor& prompt, const GenerateOptions& options = {});

}  // namespace kael::nn
