// Internal to src/train: training_state.json, what a resumed run needs beyond the weights and
// AdamW's moments, and the check that a resumed run continues the same trajectory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "kael/train/run.hpp"

namespace kael::train {

struct RunState {
  std::int64_t step = 0;             // optimizer steps done
  std::int64_t total_steps = 0;
  std::int64_t adamw_step = 0;       // AdamW's t
  std::uint64_t dropout_counter = 0; // forward_backward calls so far
  std::int64_t train_tokens = 0;
  std::uint64_t train_hash = 0;      // Hash64 of the training tokens
  std::string source;                // what the run started from (a model directory, or "init")
};

// The JSON text: the state, plus the options a resumed run must share (trajectory_options), with
// the global batch (--batch x ranks), so a run may resume on another number of ranks.
std::string state_json(const RunState& state, const RunOptions& options, int ranks);
// Those options as one line of JSON (what the ranks of one run must agree on).
std::string trajectory_text(const RunOptions& options, int ranks);
// Parses OUT/training_state.json; ValueError naming the file when it is malformed.
RunState read_state(const std::filesystem::path& file);
// ValueError naming the first option that differs from the saved run's (with both values), or
// the training data when its tokens differ. Steps, evaluation, saving, threads and the log may change.
void check_resume_matches(const std::filesystem::path& file, const RunOptions& options, int ranks,
                          std::int64_t train_tokens, std::uint64_t train_hash);

}  // namespace kael::train
