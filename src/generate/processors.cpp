// The logits processors: penalties, temperature, top-k, top-p, min-p (see sampling.hpp for
// their semantics and order). Filtered logits become -inf so later steps and the draw skip them.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "kael/core/error.hpp"
#include "kael/generate/sampling.hpp"

namespace kael::generate {
namespace {

constexpr float kFiltered = -std::numeric_limits<float>::infinity();

void check_id(std::span<float> logits, std::int32_t id) {
  if (id < 0 || static_cast<std::size_t>(id) >= logits.size())
    throw IndexError(str("token id ", id, " is outside the vocabulary of ", logits.size(), " logits"));
}

// The largest finite logit, or -inf when there is none.
float max_logit(std::span<const float> logits) {
  float best = kFiltered;
  for (float x : logits)
    if (x > best) best = x;
  return best;
}

}  // namespace

void apply_repetition_penalty(std::span<float> logits, const std::unordered_set<std::int32_t>& seen, float penalty) {
  if (penalty == 1.0f) return;
  for (std::int32_t id : seen) {
    check_id(logits, id);
    float& x = logits[static_cast<std::size_t>(id)];
    x = x < 0.0f ? x * penalty : x / penalty;
  }
}

void apply_presence_frequency(std::span<float> logits, const std::unordered_map<std::int32_t, int>& counts,
                              float presence, float frequency) {
  if (presence == 0.0f && frequency == 0.0f) return;
  for (const auto& [id, count] : counts) {
    if (count <= 0) continue;
    check_id(logits, id);
    logits[static_cast<std::size_t>(id)] -= static_cast<float>(count) * frequency + presence;
  }
}

void apply_no_repeat_ngram(std::span<float> logits, std::span<const std::int32_t> history, int n) {
  if (n <= 0 || history.size() + 1 < static_cast<std::size_t>(n)) return;
  const std::size_t prefix_len = static_cast<std::size_t>(n) - 1;
  const auto prefix = history.subspan(history.size() - prefix_len);  // the n-1 latest ids
  // Window i = history[i .. i+n-1] bans its last id when its first n-1 match the prefix. The
  // window that would start at the prefix itself needs one id more than there is.
  for (std::size_t i = 0; i + prefix_len < history.size(); ++i) {
    if (!std::equal(prefix.begin(), prefix.end(), history.begin() + static_cast<std::ptrdiff_t>(i))) continue;
    const std::int32_t banned = history[i + prefix_len];
    check_id(logits, banned);
    logits[static_cast<std::size_t>(banned)] = kFiltered;
  }
}

void apply_logit_bias(std::span<float> logits, const std::map<std::int32_t, float>& bias) {
  for (const auto& [id, value] : bias) {
    check_id(logits, id);
    logits[static_cast<std::size_t>(id)] += value;
  }
}

void apply_temperature(std::span<float> logits, float temperature) {
  if (!(temperature > 0.0f) || !std::isfinite(temperature))
    throw ValueError(str("temperature must be a positive finite number here, found ", temperature));
  if (temperature == 1.0f) return;
  for (float& x : logits) x /= temperature;
}

void apply_top_k(std::span<float> logits, int k) {
  if (k <= 0 || static_cast<std::size_t>(k) >= logits.size()) return;
  // The k-th largest value is the threshold; like HF (scores < topk[-1]) ties with it stay.
  std::vector<float> values(logits.begin(), logits.end());
  auto kth = values.begin() + (k - 1);
  std::nth_element(values.begin(), kth, values.end(), std::greater<float>());
  const float threshold = *kth;
  for (float& x : logits)
    if (x < threshold) x = kFiltered;
}

void apply_top_p(std::span<float> logits, float top_p) {
  if (top_p >= 1.0f) return;
  const float top = max_logit(logits);
  if (top == kFiltered) return;
  std::vector<std::int32_t> order;
  double total = 0.0;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] == kFiltered) continue;
    order.push_back(static_cast<std::int32_t>(i));
    total += std::exp(static_cast<double>(logits[i]) - top);
  }
  // Most likely first, lower id on ties, so the kept set does not depend on the sort.
  auto more_likely = [&](std::int32_t a, std::int32_t b) {
    return logits[static_cast<std::size_t>(a)] > logits[static_cast<std::size_t>(b)] ||
           (logits[static_cast<std::size_t>(a)] == logits[static_cast<std::size_t>(b)] && a < b);
  };
  // The nucleus is usually small: sort a growing prefix rather than the whole vocabulary.
  const double limit = static_cast<double>(top_p) * total;
  double before = 0.0;  // unnormalized mass of the tokens ranked above order[i]
  std::size_t sorted = 0, kept = order.size();
  for (std::size_t chunk = 64; sorted < order.size() && kept == order.size(); chunk *= 4) {
    const std::size_t end = std::min(order.size(), sorted + chunk);
    std::partial_sort(order.begin() + static_cast<std::ptrdiff_t>(sorted), order.begin() + static_cast<std::ptrdiff_t>(end),
                      order.end(), more_likely);
    for (std::size_t i = sorted; i < end; ++i) {
      if (i > 0 && before >= limit) {
        kept = i;
        break;
      }
      before += std::exp(static_cast<double>(logits[static_cast<std::size_t>(order[i])]) - top);
    }
    sorted = end;
  }
  for (std::size_t i = kept; i < order.size(); ++i) logits[static_cast<std::size_t>(order[i])] = kFiltered;
}

void apply_min_p(std::span<float> logits, float min_p) {
  if (min_p <= 0.0f) return;
  const float top = max_logit(logits);
  if (top == kFiltered) return;
  // p_i < min_p * p_top  <=>  exp(l_i - l_top) < min_p: the softmax normalizer cancels.
  for (float& x : logits)
    if (x != kFiltered && std::exp(static_cast<double>(x) - top) < static_cast<double>(min_p)) x = kFiltered;
}

}  // namespace kael::generate
