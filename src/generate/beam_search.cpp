// beam_search (beam_search.hpp), step for step as transformers' _beam_search: the same
// candidates, the same -1e9 offsets that keep finished and running hypotheses apart, the same
// float32 arithmetic, so the chosen ids and the scores come out equal.
#include "kael/generate/beam_search.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kael/core/error.hpp"
#include "kael/generate/sampling.hpp"
#include "kael/generate/sequence.hpp"
#include "kael/text/tokenizer.hpp"

namespace kael::generate {
namespace {

// transformers' "very large negative value": added to a score to rule it out of one ranking
// while keeping it comparable (finished candidates among running ones and the reverse).
constexpr float kRuledOut = -1.0e9f;

struct Beam {
  std::vector<std::int32_t> ids;  // generated so far
  float score = 0.0f;             // summed log-probabilities
  int session = 0;                // index of the KV cache holding prompt + ids[..-1]
};

struct Finished {
  std::vector<std::int32_t> ids;
  float score = kRuledOut;  // length-penalized
  bool done = false;        // false: an empty slot (transformers fills them with -1e9 scores)
};

struct Candidate {
  float score;  // the beam's score + this token's log-probability
  int beam;
  std::int32_t token;
};

// log_softmax in place: x - max - log(sum exp(x - max)), the sum in double.
void log_softmax(std::span<float> x) {
  float top = -std::numeric_limits<float>::infinity();
  for (float v : x) top = std::max(top, v);
  double sum = 0.0;
  for (float v : x) sum += std::exp(static_cast<double>(v) - top);
  const auto shift = static_cast<float>(static_cast<double>(top) + std::log(sum));
  for (float& v : x) v -= shift;
}

// Indices of the k largest values, largest first; equal values keep their order (lower index
// first), which is what torch.topk does with the ties these rankings meet.
template <class Score>
std::vector<int> best_k(int count, int k, Score score) {
  std::vector<int> order(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) order[static_cast<std::size_t>(i)] = i;
  k = std::min(k, count);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int a, int b) { return score(a) > score(b) || (score(a) == score(b) && a < b); });
  order.resize(static_cast<std::size_t>(k));
  return order;
}

float length_divisor(int length, float penalty) {
  // Python's int ** float, then the float32 division torch does with it.
  return static_cast<float>(std::pow(static_cast<double>(length), static_cast<double>(penalty)));
}

// The KV caches of the next step: new beam i continues old beam sources[i]'s cache. The first
// new beam to continue a cache takes it over in place; every further one (a fork) gets a cache
// no new beam continues and copies its source's used positions into it. So nothing is copied
// for a beam that simply grows, and no cache is overwritten before it has been copied from.
// Each beam owns a whole cache: the prompt's positions are copied on the first fork, not shared.
std::vector<int> reorder_caches(const model::GPT2& model, std::vector<model::Session>& sessions,
                                const std::vector<int>& sources) {
  const std::size_t n = sessions.size();
  std::vector<bool> continued(n, false);
  for (int s : sources) continued[static_cast<std::size_t>(s)] = true;
  std::vector<int> free;
  for (std::size_t s = 0; s < n; ++s)
    if (!continued[s]) free.push_back(static_cast<int>(s));
  std::vector<bool> taken(n, false);
  std::vector<int> out(sources.size());
  for (std::size_t i = 0; i < sources.size(); ++i) {
    const auto s = static_cast<std::size_t>(sources[i]);
    if (!taken[s]) {
      taken[s] = true;
      out[i] = sources[i];
      continue;
    }
    out[i] = free.back();
    free.pop_back();
    model.copy_session(sessions[static_cast<std::size_t>(out[i])], sessions[s]);
  }
  return out;
}

}  // namespace

std::optional<EarlyStopping> early_stopping_from_name(std::string_view name) {
  if (name == "false") return EarlyStopping::heuristic;
  if (name == "true") return EarlyStopping::when_full;
  if (name == "never") return EarlyStopping::never;
  return std::nullopt;
}

void BeamSearchOptions::validate(std::int64_t vocab_size) const {
  if (num_beams < 1) throw ValueError(str("num_beams must be >= 1, found ", num_beams));
  if (num_return_sequences < 1 || num_return_sequences > num_beams)
    throw ValueError(str("num_return_sequences must be in [1, num_beams = ", num_beams, "], found ",
                         num_return_sequences));
  if (!std::isfinite(length_penalty)) throw ValueError(str("length_penalty must be finite, found ", length_penalty));
  if (max_new_tokens < 1) throw ValueError(str("beam search needs max_new_tokens >= 1, found ", max_new_tokens));
  SamplingParams processors;  // the shared checks of the two processors beams use
  processors.no_repeat_ngram_size = no_repeat_ngram_size;
  processors.logit_bias = logit_bias;
  processors.validate(vocab_size);
}

BeamSearchResult beam_search(const model::GPT2& model, std::span<const std::int32_t> prompt_ids,
                             const BeamSearchOptions& options) {
  const model::Config& config = model.config();
  options.validate(config.vocab_size);
  BeamSearchResult result;
  result.prompt_ids = fit_prompt(prompt_ids, options.max_new_tokens, config.n_positions, options.truncate_prompt);
  const std::vector<std::int32_t>& prompt = result.prompt_ids;
  const int N = options.num_beams;
  const int K = 2 * N;  // transformers keeps max(2, 1 + number of eos ids) * num_beams candidates
  const auto V = static_cast<std::size_t>(config.vocab_size);

  std::vector<model::Session> sessions;
  sessions.reserve(static_cast<std::size_t>(N));
  for (int i = 0; i < N; ++i) sessions.push_back(model.new_session());

  // Every beam starts as the prompt; only the first counts (the others score -1e9), so the
  // first step does not pick the same token N times. They all read session 0 until they fork.
  std::vector<Beam> running(static_cast<std::size_t>(N));
  for (int i = 1; i < N; ++i) running[static_cast<std::size_t>(i)].score = kRuledOut;
  std::vector<Finished> finished(static_cast<std::size_t>(N));
  bool improvable = true;  // transformers' is_early_stop_heuristic_unsatisfied

  std::vector<float> logprobs(static_cast<std::size_t>(N) * V);  // (N, V)
  const auto first = model.forward(sessions[0], prompt);
  for (int b = 0; b < N; ++b) std::copy(first.begin(), first.end(), logprobs.begin() + static_cast<std::ptrdiff_t>(b * V));
  result.steps = 1;

  std::vector<std::int32_t> history;
  for (int generated = 0;;) {
    // The log-probabilities of every beam, processed, plus its score. A beam's K best tokens
    // hold every candidate of it that can be among the K best overall.
    std::vector<Candidate> pool;
    pool.reserve(static_cast<std::size_t>(N * K));
    for (int b = 0; b < N; ++b) {
      const Beam& beam = running[static_cast<std::size_t>(b)];
      std::span<float> lp(logprobs.data() + static_cast<std::size_t>(b) * V, V);
      log_softmax(lp);
      if (options.no_repeat_ngram_size > 0) {
        history.assign(prompt.begin(), prompt.end());
        history.insert(history.end(), beam.ids.begin(), beam.ids.end());
        apply_no_repeat_ngram(lp, history, options.no_repeat_ngram_size);
      }
      apply_logit_bias(lp, options.logit_bias);
      for (float& x : lp) x += beam.score;
      for (int t : best_k(static_cast<int>(V), K, [&](int t) { return lp[static_cast<std::size_t>(t)]; }))
        pool.push_back({lp[static_cast<std::size_t>(t)], b, t});
    }
    // The K best continuations over all beams (beam-major order breaks ties, as the flat index).
    const auto top = best_k(static_cast<int>(pool.size()), K, [&](int i) { return pool[static_cast<std::size_t>(i)].score; });
    std::vector<Candidate> candidates;
    for (int i : top) candidates.push_back(pool[static_cast<std::size_t>(i)]);
    const int count = static_cast<int>(candidates.size());
    const bool at_length = generated + 1 >= options.max_new_tokens;
    std::vector<bool> ends(static_cast<std::size_t>(count));
    for (int k = 0; k < count; ++k)
      ends[static_cast<std::size_t>(k)] =
          at_length || (!options.ignore_eos && candidates[static_cast<std::size_t>(k)].token == text::kEndOfText);
    const auto extended = [&](const Candidate& c) {
      std::vector<std::int32_t> ids = running[static_cast<std::size_t>(c.beam)].ids;
      ids.push_back(c.token);
      return ids;
    };

    // The next running beams: the N best candidates, those that ended pushed down by 1e9.
    std::vector<float> running_scores(static_cast<std::size_t>(count));
    for (int k = 0; k < count; ++k)
      running_scores[static_cast<std::size_t>(k)] =
          candidates[static_cast<std::size_t>(k)].score + (ends[static_cast<std::size_t>(k)] ? kRuledOut : 0.0f);
    const auto next = best_k(count, N, [&](int k) { return running_scores[static_cast<std::size_t>(k)]; });

    // Finished hypotheses: candidates among the first N that ended, length-penalized, merged
    // with the finished ones so far; the N best stay.
    bool all_done = std::all_of(finished.begin(), finished.end(), [](const Finished& f) { return f.done; });
    const bool full = all_done && options.early_stopping == EarlyStopping::when_full;
    const float divisor = length_divisor(generated + 1, options.length_penalty);
    std::vector<Finished> merged = finished;
    for (int k = 0; k < count; ++k) {
      const Candidate& c = candidates[static_cast<std::size_t>(k)];
      const bool just_finished = ends[static_cast<std::size_t>(k)] && k < N;
      float score = c.score / divisor;
      if (full) score += kRuledOut;
      if (!improvable) score += kRuledOut;
      if (!just_finished) score += kRuledOut;
      merged.push_back({extended(c), score, just_finished});
    }
    std::vector<Finished> kept;
    for (int i : best_k(static_cast<int>(merged.size()), N, [&](int i) { return merged[static_cast<std::size_t>(i)].score; }))
      kept.push_back(std::move(merged[static_cast<std::size_t>(i)]));
    finished = std::move(kept);

    std::vector<Beam> new_running;
    std::vector<int> sources;
    for (int k : next) {
      const Candidate& c = candidates[static_cast<std::size_t>(k)];
      new_running.push_back({extended(c), running_scores[static_cast<std::size_t>(k)], 0});
      sources.push_back(running[static_cast<std::size_t>(c.beam)].session);
    }
    running = std::move(new_running);
    ++generated;

    // Can a running beam still beat the worst finished one?
    const int best_length =
        options.early_stopping == EarlyStopping::never && options.length_penalty > 0.0f ? options.max_new_tokens
                                                                                        : generated;
    const float best_possible = running[0].score / length_divisor(best_length, options.length_penalty);
    float lowest = std::numeric_limits<float>::infinity();
    for (const Finished& f : finished) lowest = std::min(lowest, f.score);
    bool can_improve = false;
    for (const Finished& f : finished) can_improve = can_improve || best_possible > (f.done ? lowest : kRuledOut);
    improvable = improvable && can_improve;
    all_done = std::all_of(finished.begin(), finished.end(), [](const Finished& f) { return f.done; });
    const bool open_beam = !(all_done && options.early_stopping == EarlyStopping::when_full);
    const bool continuable = !std::all_of(ends.begin(), ends.end(), [](bool e) { return e; });
    if (!(improvable && open_beam && continuable)) break;

    // One batched step for all running beams, each on its own cache.
    const auto placed = reorder_caches(model, sessions, sources);
    std::vector<model::Session*> batch;
    std::vector<std::int32_t> tokens;
    for (int i = 0; i < N; ++i) {
      running[static_cast<std::size_t>(i)].session = placed[static_cast<std::size_t>(i)];
      batch.push_back(&sessions[static_cast<std::size_t>(placed[static_cast<std::size_t>(i)])]);
      tokens.push_back(running[static_cast<std::size_t>(i)].ids.back());
    }
    const auto logits = model.forward_batch(batch, tokens);
    for (int i = 0; i < N; ++i)
      std::copy(logits[static_cast<std::size_t>(i)].begin(), logits[static_cast<std::size_t>(i)].end(),
                logprobs.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(i) * V));
    ++result.steps;
  }

  for (int i = 0; i < options.num_return_sequences; ++i) {
    Finished& f = finished[static_cast<std::size_t>(i)];
    const bool eos = !f.ids.empty() && f.ids.back() == text::kEndOfText && !options.ignore_eos;
    result.sequences.push_back({std::move(f.ids), f.score, eos ? "stop" : "length"});
  }
  return result;
}

}  // namespace kael::generate
