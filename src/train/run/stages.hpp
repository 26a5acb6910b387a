// Internal to src/train: the training run (train::run, run.cpp) in stages with one job each,
// called in this order: prepare (options, OUT, the tokens, the ranks), resume (the state the run
// starts from), build (the model and AdamW), then step, evaluate and save in the loop. Each
// stage hands what it settled to the later ones in Plan, RunState and Trainer, so none works it
// out again. The model is nn::GPT with autograd and optim::AdamW (train/net/gpt_net.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "kael/model/gpt2.hpp"
#include "kael/optim/adam.hpp"
#include "kael/train/data.hpp"
#include "kael/train/run.hpp"
#include "kael/train/world.hpp"
#include "train/dist/agreement.hpp"
#include "train/dist/gradient_reducer.hpp"
#include "train/net/gpt_net.hpp"
#include "train/run/checkpoint.hpp"
#include "train/run/out_dir.hpp"
#include "train/run/run_state.hpp"

namespace kael::train {

using RunClock = std::chrono::steady_clock;

// What a run starts from: a model directory (finetune) or a config (train), and the tokenizer.
struct Source {
  std::filesystem::path model_dir;  // empty for a fresh model
  model::Config config;
  std::filesystem::path tokenizer_dir;
};

// What prepare settles before any model exists; the later stages only read it.
struct Plan {
  RunClock::time_point started;  // when this process's run began (Record::elapsed_s)
  Source source;
  std::filesystem::path out;
  RunOptions options;            // checked, with schedule.total_steps set
  WorldInfo world;
  bool root = false;             // rank 0: it alone reads and writes OUT, the log and the callbacks
  std::filesystem::path vocab, merges;
  CreatedOut created;
  TokenStream stream;
  TrainValSplit split;           // views of stream.tokens (a move keeps them valid)
  mutable WindowSampler sampler;  // fill() caches an epoch's order; the windows follow from the step
  int B = 0, T = 0, K = 0;
  int first_row = 0;             // this rank's first row of each global micro-batch
  std::int64_t windows_per_step = 0;
  std::int64_t total_steps = 0;
  std::uint64_t train_hash = 0;  // of split.train
  dist::Fingerprint fingerprint; // all the ranks compare but the starting weights (several ranks only)
};

// torch.set_float32_matmul_precision for the run: "medium" (BF16 products, F32 sums) at
// --precision bf16, put back as it was when the run ends.
class MatmulPrecisionScope {
 public:
  explicit MatmulPrecisionScope(Precision precision);
  MatmulPrecisionScope(MatmulPrecisionScope&& other) noexcept;
  MatmulPrecisionScope(const MatmulPrecisionScope&) = delete;
  MatmulPrecisionScope& operator=(const MatmulPrecisionScope&) = delete;
  MatmulPrecisionScope& operator=(MatmulPrecisionScope&&) = delete;
  ~MatmulPrecisionScope();

 private:
  std::string previous_;  // empty: nothing to put back
};

// The model and its optimizer: what build makes and each step updates. AdamW's two groups are
// the 2-D parameters, with the run's weight decay, and the others, without.
struct Trainer {
  GptNet model;
  optim::AdamW adamw;
  MatmulPrecisionScope precision;
  std::uint64_t dropout_counter = 0;  // micro-batches trained so far: the dropout streams' position
  std::int64_t adamw_step = 0;        // AdamW's steps so far
};

// What every step reuses: the reducer summing gradients over the ranks (with several, its thread
// starts here) and one micro-batch's (B, T) inputs and targets.
struct StepBuffers {
  StepBuffers(const Plan& plan, GptNet& model);
  dist::GradientReducer reducer;
  std::vector<std::int32_t> inputs, targets;
};

// prepare.cpp. The option checks, the threads, the data read and tokenized (before any model
// load, so a bad input costs none) and OUT refused or created (by rank 0 alone).
Plan prepare(const Source& source, const std::vector<std::filesystem::path>& data,
             const std::filesystem::path& out, RunOptions options);

// resume.cpp: all that decides whether and from what a run continues.
// The state the run starts from: step 0, or with --resume the state saved in OUT, which rank 0
// reads and checks against this run's options, data and source.
RunState resume(const Plan& plan);
// A resumed run's starting weights: OUT's on rank 0; the others' are replaced by restore().
GptNet resumed_model(const Plan& plan);
// After build: rank 0 reads AdamW's moments from OUT and sends weights, moments and counters to
// the others; every rank then sets AdamW's state and the dropout counter from them.
void restore(const Plan& plan, RunState& state, Trainer& trainer);

// build.cpp. The model (fresh, the source's, or the resumed run's), the ranks' agreement, and
// AdamW (restored when resuming).
Trainer build(const Plan& plan, RunState& state);

// step.cpp. One optimizer step, state.step to state.step + 1; returns its record.
Record step(const Plan& plan, Trainer& trainer, StepBuffers& buffers, RunState& state);

// evaluate.cpp. The held-out loss at `step`, as an eval record (collective).
Record evaluate(const Plan& plan, GptNet& model, std::int64_t step);

// save.cpp. The checkpoint's fixed files (config.json, the tokenizer's).
CheckpointText checkpoint_text(const Plan& plan);
// A checkpoint of the state after state.step steps (collective; rank 0 writes).
void save(const Plan& plan, Trainer& trainer, RunState& state, CheckpointText& text);
// What OUT holds, for the message of a run that stops on an error.
std::string last_checkpoint(const std::filesystem::path& out);

}  // namespace kael::train
