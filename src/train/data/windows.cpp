// Held-out split, windows of T + 1 tokens, and the order micro-batches read them in.
#include <cmath>

#include "kael/core/error.hpp"
#include "kael/train/data.hpp"
#include "kernels/random.hpp"  // mix64, the counter-based generator's finalizer

namespace kael::train {

namespace {

// splitmix64: the next word of the sequence `state` walks.
std::uint64_t splitmix64(std::uint64_t& state) {
  const std::uint64_t word = kernels::mix64(state);
  state += 0x9E3779B97F4A7C15ull;
  return word;
}

// Uniform in [0, bound) by rejection, so no value is favoured.
std::uint64_t uniform_below(std::uint64_t& state, std::uint64_t bound) {
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  std::uint64_t draw;
  do draw = splitmix64(state);
  while (draw >= limit);
  return draw % bound;
}

}  // namespace

TrainValSplit split_train_val(std::span<const std::int32_t> tokens, double val_fraction) {
  if (!(val_fraction >= 0.0 && val_fraction < 1.0))
    throw ValueError(str("--val-fraction must be at least 0 and below 1, got ", val_fraction));
  const auto val = static_cast<std::size_t>(std::floor(static_cast<double>(tokens.size()) * val_fraction));
  return {tokens.first(tokens.size() - val), tokens.last(val)};
}

std::int64_t window_count(std::int64_t tokens, int T) { return tokens <= 1 ? 0 : (tokens - 1) / T; }

Order parse_order(std::string_view name) {
  if (name == "sequential") return Order::sequential;
  if (name == "shuffled") return Order::shuffled;
  throw ValueError(str("unknown order '", name, "': expected sequential or shuffled"));
}

const char* order_name(Order order) { return order == Order::sequential ? "sequential" : "shuffled"; }

std::vector<std::int64_t> epoch_permutation(std::int64_t n, std::uint64_t seed, std::int64_t epoch) {
  std::vector<std::int64_t> permutation(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) permutation[static_cast<std::size_t>(i)] = i;
  std::uint64_t state = seed;
  splitmix64(state);
  state ^= static_cast<std::uint64_t>(epoch) * 0xd1b54a32d192ed03ULL;
  for (std::int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<std::int64_t>(uniform_below(state, static_cast<std::uint64_t>(i) + 1));
    std::swap(permutation[static_cast<std::size_t>(i)], permutation[static_cast<std::size_t>(j)]);
  }
  return permutation;
}

WindowSampler::WindowSampler(std::span<const std::int32_t> tokens, int T, int B, int K, Order order,
                             std::uint64_t seed)
    : tokens_(tokens), T_(T), B_(B), K_(K), order_(order), seed_(seed),
      windows_(window_count(static_cast<std::int64_t>(tokens.size()), T)) {
  if (T <= 0 || B <= 0 || K <= 0) throw ValueError(str("batch sizes must be positive (B ", B, ", T ", T, ", K ", K, ")"));
  if (windows_ == 0)
    throw ValueError(str("the training text is ", tokens.size(), " tokens, shorter than one window of --seq ", T,
                         " + 1 = ", T + 1, " tokens"));
}

std::int64_t WindowSampler::epoch(std::int64_t step, int k) const {
  return ((step * K_ + k) * B_) / windows_;
}

std::int64_t WindowSampler::window(std::int64_t step, int k, int b) {
  const std::int64_t position = (step * K_ + k) * B_ + b;
  const std::int64_t index = position % windows_;
  if (order_ == Order::sequential) return index;
  const std::int64_t epoch = position / windows_;
  if (epoch != permutation_epoch_) {
    permutation_ = epoch_permutation(windows_, seed_, epoch);
    permutation_epoch_ = epoch;
  }
  return permutation_[static_cast<std::size_t>(index)];
}

void WindowSampler::fill(std::span<std::int32_t> inputs, std::span<std::int32_t> targets, std::int64_t step, int k,
                         int first_row) {
  const auto row = static_cast<std::size_t>(T_);
  const std::size_t rows = inputs.size() / row;
  if (inputs.size() % row != 0 || rows == 0 || targets.size() != inputs.size() || first_row < 0 ||
      first_row + rows > static_cast<std::size_t>(B_))
    throw ValueError(str("micro-batch buffers hold ", inputs.size(), " and ", targets.size(), " ids from row ",
                         first_row, ", expected whole rows of T = ", T_, " within B = ", B_));
  for (std::size_t r = 0; r < rows; ++r) {
    const int b = first_row + static_cast<int>(r);
    const auto start = static_cast<std::size_t>(window(step, k, b)) * row;  // (T + 1) tokens from here
    const auto window = tokens_.subspan(start, row + 1);
    std::copy(window.begin(), window.end() - 1, inputs.begin() + static_cast<std::ptrdiff_t>(r * row));
    std::copy(window.begin() + 1, window.end(), targets.begin() + static_cast<std::ptrdiff_t>(r * row));
  }
}

}  // namespace kael::train
