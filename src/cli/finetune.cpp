// `kael finetune` and `kael train`: train a GPT-2 on text (kael/train/run.hpp does the work).
//
//   kael finetune --model DIR --data PATH... --out DIR (--steps N | --epochs E) [options]
//   kael train --config config.json [--tokenizer DIR] --data PATH... --out DIR (--steps N | --epochs E) [options]
//
// On a terminal, stderr shows a live progress line; otherwise one line a step. The loss curve is
// drawn at the end. SIGINT or SIGTERM finishes the current step, saves a checkpoint and exits
// with 128 + the signal's number (130, 143); a second one ends the process at once (the last
// checkpoint is still whole, since checkpoints are swapped in atomically).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/default_model.hpp"
#include "cli/loss_plot.hpp"
#include "kael/core/error.hpp"
#include "kael/core/peak_memory.hpp"
#include "kael/train/run.hpp"

namespace kael::cli {
namespace {

struct TrainArgs {
  std::string model_dir;      // finetune; empty: resolve_model_dir() picks data/gpt2 or the bundled model
  std::string config;         // train
  std::string tokenizer_dir;  // train; empty: resolve_tokenizer_dir()
  std::vector<std::string> data;
  std::string out;
  std::string schedule = "constant";
  std::string order = "shuffled";
  std::string precision = "f32";
  std::string log_json;
  train::RunOptions options;
};

std::atomic<int> g_stop_signal{0};

void on_stop_signal(int signal) { g_stop_signal.store(signal); }

// SIGINT and SIGTERM ask the run to stop after the current step; each handler fires once
// (SA_RESETHAND), so a second signal ends the process the usual way.
void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  action.sa_flags = SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

std::string duration_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto total = static_cast<long long>(seconds + 0.5);
  char text[32];
  if (total >= 3600) {
    std::snprintf(text, sizeof(text), "%lldh%02lldm", total / 3600, total / 60 % 60);
  } else {
    std::snprintf(text, sizeof(text), "%lldm%02llds", total / 60, total % 60);
  }
  return text;
}

// Prints each record to stderr: a progress line rewritten in place on a terminal, else a line a step.
class Progress {
 public:
  Progress() : terminal_(::isatty(STDERR_FILENO) == 1) {}

  void show(const train::Record& record) {
    char line[256];
    if (record.kind == train::Record::Kind::eval) {
      std::snprintf(line, sizeof(line), "step %lld/%lld  val_loss %.4f", static_cast<long long>(record.step),
                    static_cast<long long>(record.total_steps), record.val_loss);
      finish_line();
      std::cerr << line << "\n";
      return;
    }
    losses_.push_back(record.loss);
    if (first_step_ < 0) first_step_ = record.step;
    const double steps_left = static_cast<double>(record.total_steps - record.step);
    const double per_step = record.elapsed_s / static_cast<double>(record.step - first_step_ + 1);
    std::snprintf(line, sizeof(line), "step %lld/%lld  loss %.4f  lr %.3g  grad_norm %.3g  %.0f tokens/s  ETA %s",
                  static_cast<long long>(record.step), static_cast<long long>(record.total_steps), record.loss,
                  record.lr, record.grad_norm, record.tokens_per_s, duration_text(steps_left * per_step).c_str());
    if (terminal_) {
      std::cerr << "\r" << line << "\033[K" << std::flush;
      open_line_ = true;
    } else {
      std::cerr << line << "\n";
    }
  }

  void finish_line() {
    if (open_line_) std::cerr << "\n";
    open_line_ = false;
  }

  void plot() const { std::cerr << loss_plot(losses_, std::max<std::int64_t>(first_step_, 1)); }

 private:
  bool terminal_;
  bool open_line_ = false;
  std::vector<double> losses_;
  std::int64_t first_step_ = -1;
};

int run_training(TrainArgs& args, bool fresh) {
  auto& options = args.options;
  options.schedule.kind = train::parse_schedule(args.schedule);
  options.order = train::parse_order(args.order);
  options.precision = train::parse_precision(args.precision);
  options.log_json = args.log_json;
  const std::vector<std::filesystem::path> data(args.data.begin(), args.data.end());

  Progress progress;
  train::RunCallbacks callbacks;
  callbacks.on_start = [&](const train::RunResult& plan) {
    if (plan.ranks > 1)
      std::cerr << "data parallel: " << plan.ranks << " ranks x " << plan.threads << " threads, global batch "
                << plan.global_batch << " (--batch " << options.batch << " per rank) x " << options.seq
                << " tokens x " << options.accum << " micro-batches a step\n";
  };
  callbacks.on_record = [&](const train::Record& record) { progress.show(record); };
  callbacks.stop_requested = [] { return g_stop_signal.load() != 0; };
  install_stop_handlers();

  train::RunResult result;
  try {
    result = fresh ? train::train(model::Config::from_json_file(args.config), resolve_tokenizer_dir(args.tokenizer_dir),
                                  data, args.out, options, callbacks)
                   : train::finetune(resolve_model_dir(args.model_dir), data, args.out, options, callbacks);
  } catch (...) {
    progress.finish_line();
    throw;
  }
  progress.finish_line();
  // A stop asked on another rank (every rank stops together) ends this one as SIGTERM would.
  const int signal = g_stop_signal.load();
  const int stopped_status = 128 + (signal != 0 ? signal : SIGTERM);
  if (result.rank != 0) {  // rank 0 reports the run; the others only their memory
    std::cerr << "rank " << result.rank << ": peak RSS " << peak_rss_bytes() << " bytes\n";
    return result.stopped ? stopped_status : 0;
  }
  progress.plot();
  std::cerr << "saved " << args.out << " at step " << result.steps_done << "/" << result.total_steps << " ("
            << result.train_tokens << " training tokens, " << result.windows << " windows of " << options.seq + 1
            << (result.tokens_from_cache ? ", tokens from the cache" : "") << ")\n";
  std::cerr << "memory: " << result.parameters << " parameters (" << result.parameters * 16 / 1000000
            << " MB at 16 bytes each: weights, gradients, AdamW's m and v), activations "
            << result.activation_bytes << " bytes (" << result.activation_bytes / 1000000 << " MB); peak RSS "
            << peak_rss_bytes() << " bytes\n";
  if (result.stopped) {
    const char* why = signal == 0 ? "with the other ranks" : signal == SIGTERM ? "by SIGTERM" : "by SIGINT";
    std::cerr << "stopped " << why << "; continue with --resume\n";
    return stopped_status;
  }
  return 0;
}

void add_training_options(CLI::App* cmd, TrainArgs& args) {
  auto& o = args.options;
  cmd->add_option("--data", args.data, "Text files, directories of .txt/.text/.md/.jsonl files, or JSONL files (a \"text\" field)")
      ->required();
  cmd->add_option("--out", args.out, "Output model directory (checkpoints and training state)")->required();
  cmd->add_option("--steps", o.steps, "Optimizer steps in all");
  cmd->add_option("--epochs", o.epochs, "Passes over the training windows (instead of --steps)");
  cmd->add_option("--batch", o.batch, "Sequences per micro-batch (B); under mpirun, per rank")->capture_default_str();
  cmd->add_option("--seq", o.seq, "Tokens per sequence (T), at most n_positions")->capture_default_str();
  cmd->add_option("--accum", o.accum, "Micro-batches per optimizer step (K)")->capture_default_str();
  cmd->add_option("--lr", o.schedule.lr, "Peak learning rate")->capture_default_str();
  cmd->add_option("--schedule", args.schedule, "constant or cosine (down to --min-lr at the last step)")->capture_default_str();
  cmd->add_option("--warmup", o.schedule.warmup, "Steps of linear warmup")->capture_default_str();
  cmd->add_option("--min-lr", o.schedule.min_lr, "Floor of the cosine schedule")->capture_default_str();
  cmd->add_option("--weight-decay", o.adamw.weight_decay, "AdamW's decoupled weight decay (2-D parameters only)")
      ->capture_default_str();
  cmd->add_option("--beta1", o.adamw.beta1, "AdamW beta1")->capture_default_str();
  cmd->add_option("--beta2", o.adamw.beta2, "AdamW beta2")->capture_default_str();
  cmd->add_option("--eps", o.adamw.eps, "AdamW epsilon")->capture_default_str();
  cmd->add_option("--grad-clip", o.grad_clip, "Clip the global gradient norm to this (0: off)")->capture_default_str();
  cmd->add_option("--dropout", o.dropout, "GPT-2's dropout probability (0: off)")->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of the window order, dropout and (train) the initialization")->capture_default_str();
  cmd->add_option("--order", args.order, "sequential or shuffled (a seeded permutation per epoch)")->capture_default_str();
  cmd->add_option("--precision", args.precision,
                  "f32, or bf16: the matrix products with BF16 operands and F32 sums, as torch's CPU autocast "
                  "(needs AMX-BF16 or AVX512-BF16; weights, gradients and AdamW stay F32)")
      ->capture_default_str();
  cmd->add_option("--val-fraction", o.val_fraction, "Hold out this last fraction of the tokens for a validation loss")
      ->capture_default_str();
  cmd->add_option("--eval-every", o.eval_every, "Steps between validation losses (0: at the end only)")->capture_default_str();
  cmd->add_option("--save-every", o.save_every, "Steps between checkpoints (0: at the end only)")->capture_default_str();
  cmd->add_flag("--resume", o.resume, "Continue the run saved in --out");
  cmd->add_flag("--overwrite", o.overwrite, "Replace the model or run in --out");
  cmd->add_option("--threads", o.threads, "Threads (0: one per physical core, shared out among the ranks on a machine)")
      ->capture_default_str();
  cmd->add_option("--log-json", args.log_json, "Append one JSON object a line: each step and each evaluation");
}

RunFn setup_finetune(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("finetune", "Fine-tune a GPT-2 on text");
  cmd->add_option("--model", args->model_dir, kModelHelp);
  add_training_options(cmd, *args);
  return [args] { return run_training(*args, false); };
}

RunFn setup_train(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "Train a fresh GPT-2 (transformers' initialization) on text");
  cmd->add_option("--config", args->config, "config.json of the model (GPT2Config fields)")->required();
  cmd->add_option("--tokenizer", args->tokenizer_dir, kTokenizerHelp);
  add_training_options(cmd, *args);
  return [args] { return run_training(*args, true); };
}

const Registration finetune_registration("finetune", setup_finetune);
const Registration train_registration("train", setup_train);

}  // namespace
}  // namespace kael::cli
