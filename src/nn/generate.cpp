#include "kael/nn/generate.hpp"

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "kael/core/error.hpp"
#include "kael/generate/sampling.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"

namespace kael::nn {

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
  const Tensor ids = prompt.to(DType::I64).contiguous();
  // One engine sampler per sequence (kael::generate's processors and draw), seeded from the
  // process-wide generator so that kael::manual_seed makes a run reproducible.
  const std::vector<std::int64_t> seeds = randint(0, std::int64_t{1} << 62, {B}).to_vector<std::int64_t>();
  const std::vector<std::int64_t> prompt_ids = ids.to_vector<std::int64_t>();
  std::vector<generate::Sampler> samplers;
  for (std::int64_t b = 0; b < B; ++b) {
    generate::SamplingParams params;
    params.temperature = static_cast<float>(options.temperature);
    params.top_k = static_cast<int>(std::min<std::int64_t>(options.top_k, model.config().vocab_size));
    params.seed = static_cast<std::uint64_t>(seeds[static_cast<std::size_t>(b)]);
    samplers.emplace_back(params);
    const auto row = std::span(prompt_ids).subspan(static_cast<std::size_t>(b * prompt.size(1)),
                                                   static_cast<std::size_t>(prompt.size(1)));
    samplers.back().add_prompt(std::vector<std::int32_t>(row.begin(), row.end()));
  }
  std::vector<Tensor> pieces{ids};
  KVCache cache;
  cache.reserve(total);  // every position's room at once: no step grows or copies the cache
  Tensor input = ids;
  for (std::int64_t step = 0; step < options.max_new_tokens; ++step) {
    const Tensor last = model.forward(input, &cache).select(1, -1).to(DType::F32).contiguous();  // (B, vocab)
    std::vector<float> logits = last.to_vector<float>();
    const std::int64_t vocab = last.size(1);
    std::vector<std::int64_t> next(static_cast<std::size_t>(B));
    for (std::int64_t b = 0; b < B; ++b) {
      const std::int32_t id = samplers[static_cast<std::size_t>(b)].sample(
          std::span(logits).subspan(static_cast<std::size_t>(b * vocab), static_cast<std::size_t>(vocab)));
      samplers[static_cast<std::size_t>(b)].add_generated(id);
      next[static_cast<std::size_t>(b)] = id;
    }
    input = from_vector(next, {B, 1});
    pieces.push_back(input);
  }
  return cat(pieces, 1);
}

}  // namespace kael::nn
