// Choosing the next token from logits (docs/behaviour.md, "Generation"): penalties, temperature,
// top-k, top-p, min-p, and a seeded random draw that gives the same ids on every platform.
//
// The order follows Hugging Face's generate(): the penalties (repetition, then presence and
// frequency, then the n-gram ban and OpenAI's logit_bias) apply to every mode, greedy included; temperature -> top-k -> top-p -> min-p
// apply only when sampling. A filtered logit becomes -inf. Each step is a plain function on a
// span so a test can pin it with hand-made logits.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kael::generate {

struct SamplingParams {
  float temperature = 1.0f;         // 0 means greedy (argmax)
  int top_k = 0;                    // keep the k most likely tokens; 0 = off
  float top_p = 1.0f;               // nucleus: smallest set with probability >= top_p; 1 = off
  float min_p = 0.0f;               // drop tokens with p < min_p * p(top token); 0 = off
  float repetition_penalty = 1.0f;  // HF: divide positive logits, multiply negative; 1 = off
  float presence_penalty = 0.0f;    // OpenAI: subtract once from every token generated so far
  float frequency_penalty = 0.0f;   // OpenAI: subtract per occurrence in the generated tokens
  int no_repeat_ngram_size = 0;     // HF: no n-gram of this size occurs twice (prompt included); 0 = off
  std::map<std::int32_t, float> logit_bias;  // OpenAI: token id -> bias in [-100, 100], added to the logits
  std::uint64_t seed = 0;

  bool greedy() const { return temperature == 0.0f; }
  // ValueError naming the first parameter out of range. With vocab_size > 0, a logit_bias id
  // outside [0, vocab_size) is an IndexError.
  void validate(std::int64_t vocab_size = 0) const;
};

// A portable random source: std::mt19937_64's output sequence is fixed by the standard, and
// the conversion to a double is ours (std::uniform_real_distribution's is implementation-defined).
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : engine_(seed) {}
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

 private:
  std::mt19937_64 engine_;
};

// --- the logits processors, in the order Sampler applies them ---

// Hugging Face's repetition penalty on each token in `seen` (distinct ids): a logit < 0 is
// multiplied by `penalty`, any other is divided by it.
void apply_repetition_penalty(std::span<float> logits, const std::unordered_set<std::int32_t>& seen, float penalty);
// OpenAI's penalties: logit -= count * frequency + (count > 0) * presence, per generated token.
void apply_presence_frequency(std::span<float> logits, const std::unordered_map<std::int32_t, int>& counts,
                              float presence, float frequency);
// HF's NoRepeatNGramLogitsProcessor: with history h (prompt + generated) of length L >= n - 1,
// every token t such that h[i..i+n-2] == h[L-n+1..L-1] and t == h[i+n-1] for some i gets -inf.
// n <= 0 is a no-op.
void apply_no_repeat_ngram(std::span<float> logits, std::span<const std::int32_t> history, int n);
// OpenAI's logit_bias: logits[id] += bias for each entry (ids are checked against the span).
void apply_logit_bias(std::span<float> logits, const std::map<std::int32_t, float>& bias);
void apply_temperature(std::span<float> logits, float temperature);
// Keeps the k highest logits; like HF, a logit tied with the k-th is kept too. k <= 0 or
// k >= size is a no-op.
void apply_top_k(std::span<float> logits, int k);
// Keeps the most likely tokens, in order, while the probability before each is < top_p (the
// smallest set reaching top_p, as HF computes it); always keeps the most likely token.
void apply_top_p(std::span<float> logits, float top_p);
// Drops tokens whose probability is < min_p times the top token's (HF's MinPLogitsWarper).
void apply_min_p(std::span<float> logits, float min_p);

// Index of the largest logit, the lowest index on an exact tie (as torch.argmax).
std::int32_t argmax(std::span<const float> logits);
// Draws from softmax(logits) by inverse CDF over ids in ascending order with `u` in [0, 1).
// -inf logits have probability 0. Needs at least one finite logit.
std::int32_t sample_index(std::span<const float> logits, double u);

struct TokenLogprob {
  std::int32_t id;
  float logprob;
};
// log_softmax(logits)[id].
float logprob_of(std::span<const float> logits, std::int32_t id);
// The n most likely tokens with their log-probabilities, highest first (lower id on ties).
std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int n);

// One sequence's sampler: its parameters, random state and the token history the penalties
// need. Copyable, so a server can hold one per sequence.
class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // Records the prompt (it counts for the repetition penalty only, as in HF).
  void add_prompt(std::span<const std::int32_t> ids);
  // Records a generated token (it counts for every penalty).
  void add_generated(std::int32_t id);

  // Applies the processors to `logits` in place and returns the chosen id.
  std::int32_t sample(std::span<float> logits);

  const SamplingParams& params() const { return params_; }

 private:
  SamplingParams params_;
  Rng rng_;
  std::vector<std::int32_t> history_;                     // prompt + generated, for no_repeat_ngram_size
  std::unordered_set<std::int32_t> seen_;                 // prompt + generated
  std::unordered_map<std::int32_t, int> generated_counts_;  // generated only
};

}  // namespace kael::generate
