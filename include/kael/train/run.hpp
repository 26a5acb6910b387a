// A whole training run, shared by `kael finetune` / `kael train` and kael.finetune / kael.train:
// data, the optimizer loop, evaluation, checkpoints and resuming. The model is the tensor
// library's nn::GPT, trained with autograd and optim::AdamW (weight decay on the 2-D parameters).
//
// Data parallel: under `mpirun -np N` every process (rank) holds the whole model and optimizer,
// reads its --batch rows of each global micro-batch of --batch x N windows, and the gradients
// are summed over the ranks (in buckets, during the backward pass) before one identical AdamW
// step on each.
// Rank 0 alone writes OUT and the log. The ranks must be given the same command: other
// options, data or models are refused before the first step. OUT records the global batch, so
// a run resumes on any number of ranks whose --batch x ranks is the same (train/world.hpp).
//
// The output directory OUT is a model directory that kael and transformers both load, plus the
// state a resumed run needs:
//   OUT/model.safetensors        parameters under Hugging Face's names, F32, Conv1D layout
//   OUT/config.json              GPT2Config fields (copied from the source model when it has one)
//   OUT/vocab.json, merges.txt   the tokenizer, copied from the source
//   OUT/optimizer.safetensors    AdamW's moments: "exp_avg.NAME" and "exp_avg_sq.NAME" per parameter
//   OUT/training_state.json      step, AdamW step, dropout counter, the options that must match
//                                on --resume, and the token stream's size and hash
//   OUT/.kael-train/             the token cache (see tokenize_files)
// Every checkpoint is written into a new directory beside OUT, synced, and swapped with OUT in
// one rename (renameat2 RENAME_EXCHANGE), so OUT always holds one complete checkpoint: a crash
// during a save leaves the previous one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kael/model/gpt2.hpp"
#include "kael/train/data.hpp"
#include "kael/train/precision.hpp"
#include "kael/train/schedule.hpp"

namespace kael::train {

// AdamW's hyperparameters besides the rate (torch.optim.AdamW's, amsgrad off); the run puts the
// 2-D parameters (wte, wpe, an untied lm_head, the four matrices of each block) in a group with
// weight_decay and the others in one without.
struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

struct RunOptions {
  std::int64_t steps = 0;  // optimizer steps in all; 0: from epochs
  double epochs = 0;       // passes over the training windows, when steps is 0: ceil(epochs * W / (B * K)) steps
  int batch = 4;           // B, sequences per micro-batch
  int seq = 128;           // T, tokens per sequence (at most n_positions)
  int accum = 1;           // K, micro-batches per optimizer step
  Schedule schedule;       // total_steps is filled in from steps / epochs
  AdamWOptions adamw;
  double grad_clip = 1.0;  // max global L2 norm; 0 turns clipping off
  float dropout = 0.0f;    // GPT-2's three dropouts; 0 turns them off
  std::uint64_t seed = 0;  // window order, dropout masks and (kael train) the initialization
  Order order = Order::shuffled;
  double val_fraction = 0.0;     // held out from the end of the token stream
  std::int64_t eval_every = 0;   // steps between validation losses (0: only at the end)
  std::int64_t save_every = 0;   // steps between checkpoints (0: only at the end)
  bool resume = false;           // continue the run saved in OUT
  bool overwrite = false;        // replace the model or run in OUT
  int threads = 0;               // 0: one per physical core
  Precision precision = Precision::f32;  // of the matrix products (precision.hpp)
  std::filesystem::path log_json;  // when set, one JSON record a line (appended on --resume)
};

// One line of the history: an optimizer step's figures, or a validation loss.
struct Record {
  enum class Kind { step, eval };
  Kind kind = Kind::step;
  std::int64_t step = 0;  // optimizer steps done (1 after the first)
  std::int64_t total_steps = 0;
  double loss = 0;          // step: mean cross-entropy over its B * T * K targets
  double lr = 0;            // step: the rate this step used
  double grad_norm = 0;     // step: the global norm before clipping
  double tokens_per_s = 0;  // step: B * T * K / the step's wall time
  double step_s = 0;        // step: its wall time
  double cpu_s = 0;         // step: the process's CPU time during it (all threads)
  double elapsed_s = 0;     // since the run (this process) started
  double epoch = 0;         // step: windows read so far / W
  double val_loss = 0;      // eval: mean cross-entropy over every held-out window
  // step, with several ranks: how long the step waited after its backward for the gradient sums
  // (the part of the all-reduce the backward did not hide)
  std::optional<double> reduce_wait_s;
};

// The record as one JSON object (no newline): step records carry step, loss, lr, grad_norm,
// tokens_per_s, step_s, cpu_s, elapsed_s, epoch (and reduce_wait_s with several ranks); eval
// records step, val_loss, elapsed_s; both "type".
std::string record_json(const Record& record);

struct RunResult;

// With several ranks (mpirun), on_start and on_record are called on rank 0 only; stop_requested
// is polled on every rank, and any rank's request stops them all after the same step.
struct RunCallbacks {
  // Called once before the first step, with the result's plan filled in (total_steps, windows,
  // parameters, ranks, threads, global_batch) and no history.
  std::function<void(const RunResult&)> on_start;
  // Called after each step and each evaluation, on the training thread.
  std::function<void(const Record&)> on_record;
  // Polled after each step: true saves a checkpoint and ends the run (RunResult::stopped).
  std::function<bool()> stop_requested;
};

struct RunResult {
  std::vector<Record> history;  // this run's records
  std::int64_t steps_done = 0;  // optimizer steps in OUT's checkpoint
  std::int64_t total_steps = 0;
  bool stopped = false;         // ended by stop_requested before total_steps
  std::int64_t train_tokens = 0;
  std::int64_t windows = 0;     // W, training windows
  bool tokens_from_cache = false;
  std::int64_t parameters = 0;        // trainable parameters (a tied wte once)
  std::int64_t activation_bytes = 0;  // what the model holds for one (B, T) micro-batch
  int ranks = 1;         // processes training together (mpirun -np); 1 otherwise
  int rank = 0;          // this process's (only rank 0 writes OUT, the log and the callbacks)
  int threads = 1;       // kael's threads in this process
  int global_batch = 0;  // sequences per micro-batch over all ranks: --batch x ranks
};

// Fine-tunes the model in model_dir (which also gives the tokenizer). Throws kael errors (the
// message says what and why) for bad options or data, an OUT that cannot be used, and a loss or
// gradient that stops being finite (naming the step; OUT keeps its last checkpoint).
RunResult finetune(const std::filesystem::path& model_dir, const std::vector<std::filesystem::path>& data,
                   const std::filesystem::path& out, const RunOptions& options, const RunCallbacks& callbacks = {});

// Trains a fresh GPT-2 of `config` (transformers' initialization, drawn with options.seed), with the
// tokenizer files in tokenizer_dir. Errors as finetune; ValueError when the config's vocabulary is smaller
// than the tokenizer's.
RunResult train(const model::Config& config, const std::filesystem::path& tokenizer_dir,
                const std::vector<std::filesystem::path>& data, const std::filesystem::path& out,
                const RunOptions& options, const RunCallbacks& callbacks = {});

}  // namespace kael::train
