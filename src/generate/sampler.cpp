// Parameter checks, the final choice (argmax or a seeded draw), log-probabilities, and the
// per-sequence Sampler that runs the processors in Hugging Face's order.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "kael/core/error.hpp"
#include "kael/generate/sampling.hpp"

namespace kael::generate {
namespace {

constexpr float kFiltered = -std::numeric_limits<float>::infinity();

float max_finite(std::span<const float> logits) {
  float best = kFiltered;
  for (float x : logits)
    if (x > best) best = x;
  if (best == kFiltered) throw ValueError(str("no token is left to choose from among ", logits.size(), " logits"));
  return best;
}

double log_sum_exp(std::span<const float> logits, float top) {
  double sum = 0.0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - top);
  return static_cast<double>(top) + std::log(sum);
}

}  // namespace

void SamplingParams::validate(std::int64_t vocab_size) const {
  auto finite = [](float x) { return std::isfinite(x); };
  if (!finite(temperature) || temperature < 0.0f)
    throw ValueError(str("temperature must be >= 0 (0 means greedy), found ", temperature));
  if (top_k < 0) throw ValueError(str("top_k must be >= 0 (0 turns it off), found ", top_k));
  if (!finite(top_p) || top_p <= 0.0f || top_p > 1.0f) throw ValueError(str("top_p must be in (0, 1], found ", top_p));
  if (!finite(min_p) || min_p < 0.0f || min_p > 1.0f) throw ValueError(str("min_p must be in [0, 1], found ", min_p));
  if (!finite(repetition_penalty) || repetition_penalty <= 0.0f)
    throw ValueError(str("repetition_penalty must be > 0 (1 turns it off), found ", repetition_penalty));
  if (!finite(presence_penalty)) throw ValueError(str("presence_penalty must be finite, found ", presence_penalty));
  if (!finite(frequency_penalty)) throw ValueError(str("frequency_penalty must be finite, found ", frequency_penalty));
  if (no_repeat_ngram_size < 0)
    throw ValueError(str("no_repeat_ngram_size must be >= 0 (0 turns it off), found ", no_repeat_ngram_size));
  for (const auto& [id, bias] : logit_bias) {
    if (!finite(bias) || bias < -100.0f || bias > 100.0f)
      throw ValueError(str("logit_bias for token ", id, " must be in [-100, 100], found ", bias));
    if (id < 0 || (vocab_size > 0 && id >= vocab_size))
      throw IndexError(str("logit_bias token id ", id, " is outside the vocabulary [0, ",
                           vocab_size > 0 ? str(vocab_size) : std::string("vocab_size"), ")"));
  }
}

std::int32_t argmax(std::span<const float> logits) {
  if (logits.empty()) throw ValueError("argmax of an empty logits vector");
  std::size_t best = 0;
  for (std::size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = i;  // strict: the first maximum wins
  return static_cast<std::int32_t>(best);
}

std::int32_t sample_index(std::span<const float> logits, double u) {
  const float top = max_finite(logits);
  double total = 0.0;
  for (float x : logits) total += std::exp(static_cast<double>(x) - top);
  const double target = u * total;
  double cumulative = 0.0;
  std::size_t last_possible = 0;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const double weight = std::exp(static_cast<double>(logits[i]) - top);
    if (weight == 0.0) continue;
    cumulative += weight;
    last_possible = i;
    if (cumulative > target) return static_cast<std::int32_t>(i);
  }
  return static_cast<std::int32_t>(last_possible);  // u * total rounded up to the full sum
}

float logprob_of(std::span<const float> logits, std::int32_t id) {
  if (id < 0 || static_cast<std::size_t>(id) >= logits.size())
    throw IndexError(str("token id ", id, " is outside the vocabulary of ", logits.size(), " logits"));
  const float top = max_finite(logits);
  return static_cast<float>(static_cast<double>(logits[static_cast<std::size_t>(id)]) - log_sum_exp(logits, top));
}

std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int n) {
  if (n <= 0 || logits.empty()) return {};
  const float top = max_finite(logits);
  const double lse = log_sum_exp(logits, top);
  std::vector<std::int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  const auto count = std::min(ids.size(), static_cast<std::size_t>(n));
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(count), ids.end(),
                    [&](std::int32_t a, std::int32_t b) {
                      const float la = logits[static_cast<std::size_t>(a)], lb = logits[static_cast<std::size_t>(b)];
                      return la > lb || (la == lb && a < b);
                    });
  std::vector<TokenLogprob> out;
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i)
    out.push_back({ids[i], static_cast<float>(static_cast<double>(logits[static_cast<std::size_t>(ids[i])]) - lse)});
  return out;
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) { params_.validate(); }

void Sampler::add_prompt(std::span<const std::int32_t> ids) {
  seen_.insert(ids.begin(), ids.end());
  if (params_.no_repeat_ngram_size > 0) history_.insert(history_.end(), ids.begin(), ids.end());
}

void Sampler::add_generated(std::int32_t id) {
  seen_.insert(id);
  if (params_.no_repeat_ngram_size > 0) history_.push_back(id);
  ++generated_counts_[id];
}

std::int32_t Sampler::sample(std::span<float> logits) {
  // Penalties first, in every mode (HF applies its logits processors before greedy search too).
  apply_repetition_penalty(logits, seen_, params_.repetition_penalty);
  apply_presence_frequency(logits, generated_counts_, params_.presence_penalty, params_.frequency_penalty);
  apply_no_repeat_ngram(logits, history_, params_.no_repeat_ngram_size);
  apply_logit_bias(logits, params_.logit_bias);
  if (params_.greedy()) return argmax(logits);
  // HF's warper order: temperature -> top-k -> top-p -> min-p.
  apply_temperature(logits, params_.temperature);
  apply_top_k(logits, params_.top_k);
  apply_top_p(logits, params_.top_p);
  apply_min_p(logits, params_.min_p);
  return sample_index(logits, rng_.uniform());
}

}  // namespace kael::generate
