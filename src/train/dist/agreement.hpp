// Internal to src/train: what keeps the ranks of a run one run. Before the first step they
// compare what they were given; on --resume rank 0 sends what it read from OUT; before each save
// they compare their weights. Every function is collective; with one rank each does nothing.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kael/train/world.hpp"

namespace kael::train::dist {

// What the ranks of one run must agree on, each as a hash.
struct Fingerprint {
  std::uint64_t options = 0;  // everything that decides the steps, their count, evaluation and saving
  std::uint64_t data = 0;     // the training and held-out tokens
  std::uint64_t model = 0;    // the configuration, and the starting weights unless resuming
};

// The hash of the weights (each parameter's values, in order) that check_ranks_agree and
// check_weights_agree compare.
std::uint64_t weights_hash(const std::vector<std::span<float>>& weights);

// ValueError on every rank, naming the first rank and part that differ from rank 0's; the ranks
// then leave together (nothing was trained).
void check_ranks_agree(const Fingerprint& mine, const WorldInfo& world);

// Error when a rank's weights differ from rank 0's (never expected: each rank takes the same update
// from the same summed gradients); called before a save, so a divergence is never saved.
void check_weights_agree(const std::vector<std::span<float>>& weights, const WorldInfo& world, std::int64_t step);

// Rank 0's values of every buffer and of the counters on every rank (a resumed run's weights,
// AdamW moments and counters, read by rank 0).
void share_from_rank0(const std::vector<std::span<float>>& buffers, std::span<std::int64_t> counters);

}  // namespace kael::train::dist
