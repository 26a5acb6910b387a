#include "kael/nn/generate.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kael/core/error.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"

namespace kael::nn {

namespace {

// One token id from a row of logits.
std::int64_t next_token(const Tensor& row_logits, const GenerateOptions& options) {
  const Tensor logits = row_logits.to(DType::F32).contiguous();
  if (options.temperature == 0.0) return argmax(logits).item<std::int64_t>();
  std::vector<float> values = logits.to_vector<float>();
  const auto vocab = static_cast<std::int64_t>(values.size());
  if (options.top_k > 0 && options.top_k < vocab) {
    std::vector<float> sorted = values;
    std::nth_element(sorted.begin(), sorted.begin() + (options.top_k - 1), sorted.end(), std::greater<>());
    const float kth = sorted[static_cast<std::size_t>(options.top_k - 1)];
    for (float& v : values)
      if (v < kth) v = -INFINITY;
  }
  const float largest = *std::max_element(values.begin(), values.end());
  std::vector<double> weights(values.size());
  double total = 0.0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    weights[i] = std::exp((static_cast<double>(values[i]) - largest) / options.temperature);
    total += weights[i];
  }
  // One uniform draw from the process-wide generator picks the token.
  const double u = rand({}, DType::F64).item<double>() * total;
  double running = 0.0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    running += weights[i];
    if (u < running) return static_cast<std::int64_t>(i);
  }
  return vocab - 1;  // u at the very top of the range: the last token with weight
}

}  // namespace

Tensor generate(GPT& model, const Tensor& prompt, const GenerateOptions& options) {
  if (prompt.dim() != 2) throw ValueError(str("generate: the prompt must have shape (B, T), got ", shape_to_string(prompt.shape())));
  if (prompt.size(1) == 0) throw ValueError("generate: the prompt has no tokens");
  if (options.max_new_tokens < 0 || options.temperature < 0.0 || options.top_k < 0)
    throw ValueError(str("generate: max_new_tokens (", options.max_new_tokens, "), temperature (", options.temperature,
                         ") and top_k (", options.top_k, ") must not be negative"));
  const std::int64_t total = prompt.size(1) + options.max_new_tokens;
  if (total > model.config().n_positions)
    throw ValueError(str("generate: the prompt's ", prompt.size(1), " tokens and ", options.max_new_tokens,
                         " new ones exceed the model's context of ", model.config().n_positions));
  const autograd::NoGradGuard guard;
  const std::int64_t B = prompt.size(0);
  std::vector<Tensor> pieces{prompt.to(DType::I64)};
  KVCache cache;
  cache.reserve(total);  // every position's room at once: no step grows or copies the cache
  Tensor input = pieces[0];
  for (std::int64_t step = 0; step < options.max_new_tokens; ++step) {
    const Tensor logits = model.forward(input, &cache);  // (B, T, vocab)
    std::vector<std::int64_t> next(static_cast<std::size_t>(B));
    for (std::int64_t b = 0; b < B; ++b) next[static_cast<std::size_t>(b)] = next_token(logits.select(0, b).select(0, -1), options);
    input = from_vector(next, {B, 1});
    pieces.push_back(input);
  }
  return cat(pieces, 1);
}

}  // namespace kael::nn
