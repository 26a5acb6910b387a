// The training run: checks, data, the optimizer loop, evaluation and checkpoints.
#include "kael/train/run.hpp"

#include <chrono>
#include <cmath>

#include <nlohmann/json.hpp>

#include "kael/core/cpu_clock.hpp"
#include "kael/core/error.hpp"
#include "kael/core/json.hpp"
#include "kael/text/tokenizer.hpp"
#include "train/run/checkpoint.hpp"
#include "train/data/hash.hpp"
#include "kael/core/file.hpp"
#include "train/run/log_file.hpp"
#include "train/run/out_dir.hpp"
#include "train/run/run_state.hpp"
#include "train/dist/agreement.hpp"
#include "train/dist/gradient_reducer.hpp"
#include "train/dist/world.hpp"

namespace kael::train {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// What a run starts from: a model directory (finetune) or a config (train), and the tokenizer.
struct Source {
  fs::path model_dir;  // empty for a fresh model
  model::Config config;
  fs::path tokenizer_dir;
};

void validate(const RunOptions& o) {
  if (o.steps < 0) throw ValueError(str("--steps must not be negative, got ", o.steps));
  if (!(o.epochs >= 0) || !std::isfinite(o.epochs)) throw ValueError(str("--epochs must be a non-negative number, got ", o.epochs));
  if (o.steps == 0 && o.epochs == 0) throw ValueError("give --steps N or --epochs E (how long to train)");
  if (o.steps > 0 && o.epochs > 0) throw ValueError("give either --steps or --epochs, not both");
  if (o.batch < 1) throw ValueError(str("--batch must be at least 1, got ", o.batch));
  if (o.seq < 1) throw ValueError(str("--seq must be at least 1, got ", o.seq));
  if (o.accum < 1) throw ValueError(str("--accum must be at least 1, got ", o.accum));
  o.schedule.validate();
  const auto& a = o.adamw;
  if (!(a.beta1 >= 0 && a.beta1 < 1)) throw ValueError(str("--beta1 must be in [0, 1), got ", a.beta1));
  if (!(a.beta2 >= 0 && a.beta2 < 1)) throw ValueError(str("--beta2 must be in [0, 1), got ", a.beta2));
  if (!(a.eps > 0) || !std::isfinite(a.eps)) throw ValueError(str("--eps must be positive, got ", a.eps));
  if (!(a.weight_decay >= 0) || !std::isfinite(a.weight_decay))
    throw ValueError(str("--weight-decay must not be negative, got ", a.weight_decay));
  if (!(o.grad_clip >= 0) || !std::isfinite(o.grad_clip))
    throw ValueError(str("--grad-clip must not be negative (0 turns it off), got ", o.grad_clip));
  if (!(o.dropout >= 0 && o.dropout < 1)) throw ValueError(str("--dropout must be in [0, 1), got ", o.dropout));
  require_precision(o.precision);
  if (o.eval_every < 0) throw ValueError(str("--eval-every must not be negative, got ", o.eval_every));
  if (o.save_every < 0) throw ValueError(str("--save-every must not be negative, got ", o.save_every));
  if (o.resume && o.overwrite) throw ValueError("give either --resume or --overwrite, not both");
}

// The held-out loss: every window of `tokens` once, B at a time, each window weighing the same.
// The ranks share the batches (rank r takes every world.size-th from the r-th).
double validation_loss(TrainableGPT2& model, std::span<const std::int32_t> tokens, int B, int T,
                       const WorldInfo& world) {
  const std::int64_t windows = window_count(static_cast<std::int64_t>(tokens.size()), T);
  std::vector<std::int32_t> inputs(static_cast<std::size_t>(B) * T), targets(inputs.size());  // (B, T)
  double sum = 0;
  for (std::int64_t first = std::int64_t{B} * world.rank; first < windows; first += std::int64_t{B} * world.size) {
    const int rows = static_cast<int>(std::min<std::int64_t>(B, windows - first));
    for (int b = 0; b < rows; ++b) {
      const auto window = tokens.subspan(static_cast<std::size_t>((first + b) * T), static_cast<std::size_t>(T) + 1);
      std::copy(window.begin(), window.end() - 1, inputs.begin() + static_cast<std::ptrdiff_t>(b) * T);
      std::copy(window.begin() + 1, window.end(), targets.begin() + static_cast<std::ptrdiff_t>(b) * T);
    }
    sum += static_cast<double>(model.evaluate(inputs.data(), targets.data(), rows, T)) * rows;
  }
  return dist::sum(sum) / static_cast<double>(windows);
}

std::uint64_t hash_text(std::string_view text) {
  Hash64 hash;
  hash.update(text);
  return hash.digest();
}

std::uint64_t hash_tokens(std::span<const std::int32_t> tokens) {
  Hash64 hash;
  hash.update(std::as_bytes(tokens));
  return hash.digest();
}

// What OUT holds, for the message of a run that stops on an error.
std::string last_checkpoint(const fs::path& out) {
  if (inspect_out(out) != OutKind::run) return "what it held before (this run saved no checkpoint)";
  try {
    return str("its last checkpoint, from step ", read_state(out / kStateFile).step);
  } catch (const Error&) {
    return "its last checkpoint";
  }
}

// A resumed run continues the saved model: refuses a --config (train) or --model (finetune)
// other than the one the saved run started from, naming the first difference.
void check_resume_source(const RunState& saved, const Source& source, const fs::path& out) {
  const std::string now = source.model_dir.empty() ? "init" : fs::absolute(source.model_dir).string();
  const auto same_place = [](const std::string& a, const std::string& b) {
    std::error_code ec;  // either may be gone: then only the names compare
    return a == b || (a != "init" && b != "init" && fs::equivalent(a, b, ec));
  };
  if (!same_place(saved.source, now))
    throw ValueError(str("--resume: the saved run in '", out.string(), "' started from ",
                         saved.source == "init" ? std::string("a --config (kael train)") : str("--model '", saved.source, "'"),
                         ", not from ", now == "init" ? std::string("a --config") : str("--model '", now, "'"),
                         "; resume it the way it was started"));
  const model::Config kept = model::Config::from_directory(out);
  const model::Config& given = source.config;
  const auto differ = [&](const char* name, auto a, auto b) {
    if (a != b)
      throw ValueError(str("--resume: ", source.model_dir.empty() ? "--config" : "--model", " has ", name, " = ", a,
                           " but the saved run's model has ", name, " = ", b,
                           "; resume with the configuration the run was started with"));
  };
  differ("n_layer", given.n_layer, kept.n_layer);
  differ("n_head", given.n_head, kept.n_head);
  differ("n_embd", given.n_embd, kept.n_embd);
  differ("n_positions", given.n_positions, kept.n_positions);
  differ("vocab_size", given.vocab_size, kept.vocab_size);
  differ("n_inner", given.mlp_dim(), kept.mlp_dim());
  differ("layer_norm_epsilon", given.layer_norm_epsilon, kept.layer_norm_epsilon);
  const auto boolean = [](bool b) { return std::string(b ? "true" : "false"); };
  differ("tie_word_embeddings", boolean(given.tie_word_embeddings), boolean(kept.tie_word_embeddings));
}

RunResult run(const Source& source, const std::vector<fs::path>& data, const fs::path& out, RunOptions options,
              const RunCallbacks& callbacks) {
  const auto started = Clock::now();
  validate(options);
  const model::Config& config = source.config;
  if (options.seq > config.n_positions)
    throw ValueError(str("--seq ", options.seq, " is above the model's n_positions ", config.n_positions));
  const WorldInfo world = train::world();
  const bool root = world.rank == 0;
  model::set_num_threads(options.threads);
  if (options.threads == 0 && world.local_size > 1)  // the machine's cores are shared by its ranks
    model::set_num_threads(std::max(1, model::num_threads() / world.local_size));

  // Data first (cheap checks, then tokenizing), so a bad input costs no model load.
  const auto files = list_data_files(data);
  const fs::path vocab = source.tokenizer_dir / "vocab.json", merges = source.tokenizer_dir / "merges.txt";
  const auto tokenizer = text::Tokenizer::from_files(vocab, merges);
  if (tokenizer.vocabulary_size() > static_cast<std::size_t>(config.vocab_size))
    throw ValueError(str("the tokenizer has ", tokenizer.vocabulary_size(), " tokens, more than the model's vocab_size ",
                         config.vocab_size));
  // Rank 0 alone owns OUT (the others may be on machines that do not see it) and its cache.
  const CreatedOut created{out, root && prepare_out(out, options)};
  const fs::path tokenizer_files[] = {vocab, merges};
  const TokenStream stream = tokenize_files(files, tokenizer, tokenizer_files, root ? out / kCacheDir : fs::path());
  const auto split = split_train_val(stream.tokens, options.val_fraction);
  // Each optimizer step reads K global micro-batches of B x ranks windows; rank r takes rows
  // [r B, (r + 1) B) of each, so the run reads the windows one process with --batch B x ranks would.
  const int B = options.batch, T = options.seq, K = options.accum;
  const int first_row = B * world.rank;
  WindowSampler sampler(split.train, T, B * world.size, K, options.order, options.seed);
  if (options.val_fraction > 0 && window_count(static_cast<std::int64_t>(split.val.size()), T) == 0)
    throw ValueError(str("the held-out text (--val-fraction ", options.val_fraction, ") is ", split.val.size(),
                         " tokens, shorter than one window of --seq ", T, " + 1 tokens"));
  const std::int64_t windows_per_step = static_cast<std::int64_t>(B) * world.size * K;
  const std::int64_t total_steps =
      options.steps > 0 ? options.steps
                        : std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(
                                                        options.epochs * static_cast<double>(sampler.windows()) /
                                                        static_cast<double>(windows_per_step))));
  options.schedule.total_steps = total_steps;
  const std::uint64_t train_hash = hash_tokens(split.train);

  RunState state;
  state.total_steps = total_steps;
  state.train_tokens = static_cast<std::int64_t>(split.train.size());
  state.train_hash = train_hash;
  state.source = source.model_dir.empty() ? "init" : fs::absolute(source.model_dir).string();
  if (options.resume && root) {
    check_resume_matches(out / kStateFile, options, world.size, state.train_tokens, train_hash);
    const RunState saved = read_state(out / kStateFile);
    check_resume_source(saved, source, out);
    if (saved.step > total_steps)
      throw ValueError(str("--resume: the saved run is at step ", saved.step, ", beyond --steps ", total_steps));
    state.step = saved.step;
    state.adamw_step = saved.adamw_step;
    state.dropout_counter = saved.dropout_counter;
    state.source = saved.source;
  }

  // A resumed run's weights come from OUT, which rank 0 reads and sends to the others.
  TrainableGPT2 model = options.resume ? (root ? TrainableGPT2::load(out) : TrainableGPT2::init(config, options.seed))
                        : source.model_dir.empty() ? TrainableGPT2::init(config, options.seed)
                                                   : TrainableGPT2::load(source.model_dir);
  if (world.size > 1) {
    dist::Fingerprint mine{hash_text(trajectory_text(options, world.size) +
                               str(" steps ", total_steps, " eval ", options.eval_every, " save ", options.save_every,
                                   " resume ", options.resume)),
                     train_hash ^ hash_tokens(split.val) ^ static_cast<std::uint64_t>(state.train_tokens),
                     hash_text(config.to_json("float32"))};
    if (!options.resume) mine.model ^= dist::weights_hash(model.flat_values());
    dist::check_ranks_agree(mine, world);
  }
  model.set_dropout({options.dropout, options.seed});
  model.set_precision(options.precision);
  model.set_first_row(first_row);
  AdamW adamw(model.parameters(), options.adamw);
  if (options.resume) {
    if (root) load_optimizer(out, model, adamw);
    if (world.size > 1) {
      std::int64_t counters[] = {state.step, state.adamw_step, static_cast<std::int64_t>(state.dropout_counter)};
      dist::share_from_rank0(model, adamw, counters);
      state.step = counters[0];
      state.adamw_step = counters[1];
      state.dropout_counter = static_cast<std::uint64_t>(counters[2]);
    }
    adamw.set_step_count(state.adamw_step);
    model.set_dropout_counter(state.dropout_counter);
  }
  model.reserve(B, T);

  CheckpointText text;
  const fs::path source_config = source.model_dir / "config.json";
  // A fine-tuned model keeps its source's config.json (keys kael does not read included), but its
  // weights are F32 whatever the source's were.
  if (!source.model_dir.empty() && fs::exists(source_config)) {
    auto doc = json::parse_ordered(read_regular_file(source_config, "config", model::kMaxConfigBytes), str("'", source_config.string(), "'"));
    doc["torch_dtype"] = "float32";
    text.config_json = doc.dump(2) + "\n";
  } else {
    text.config_json = config.to_json("float32");
  }
  text.vocab_json = read_regular_file(vocab, "tokenizer file", text::kMaxTokenizerFileBytes);
  text.merges_txt = read_regular_file(merges, "tokenizer file", text::kMaxTokenizerFileBytes);
  // Collective: every rank checks the weights agree; rank 0 writes.
  const auto save = [&] {
    dist::check_weights_agree(model.flat_values(), world, state.step);
    if (!root) return;
    state.adamw_step = adamw.step_count();
    state.dropout_counter = model.dropout_counter();
    text.state_json = state_json(state, options, world.size);
    try {
      save_checkpoint(out, model, adamw, text);
    } catch (const ValueError& e) {  // a weight that is not finite; nothing was written
      throw ValueError(str("the weights became non-finite at step ", state.step, " (", e.what(),
                           "); training stopped, and '", out.string(), "' keeps ", last_checkpoint(out)));
    }
  };

  LogFile log(root ? options.log_json : fs::path(), options.resume);
  RunResult result;
  result.ranks = world.size;
  result.rank = world.rank;
  result.threads = model::num_threads();
  result.global_batch = B * world.size;
  result.total_steps = total_steps;
  result.train_tokens = state.train_tokens;
  result.windows = sampler.windows();
  result.tokens_from_cache = stream.from_cache;
  result.parameters = model.parameter_count();
  result.activation_bytes = model.activation_bytes(B, T);
  const auto emit = [&](const Record& record) {
    result.history.push_back(record);
    if (!root) return;
    log.write(record);
    if (callbacks.on_record) callbacks.on_record(record);
  };
  const auto evaluate = [&] {
    Record record;
    record.kind = Record::Kind::eval;
    record.step = state.step;
    record.total_steps = total_steps;
    record.val_loss = validation_loss(model, split.val, B, T, world);
    record.elapsed_s = seconds_since(started);
    emit(record);
  };

  if (root && callbacks.on_start) callbacks.on_start(result);
  dist::GradientReducer reducer;
  std::vector<std::int32_t> inputs(static_cast<std::size_t>(B) * T), targets(inputs.size());  // (B, T)
  if (!split.val.empty() && options.eval_every > 0 && state.step == 0) evaluate();  // the loss to improve on
  bool saved_last = true, evaluated_last = true;
  while (state.step < total_steps) {
    const auto step_start = Clock::now();
    const double cpu_start = process_cpu_seconds();
    const std::int64_t s = state.step;  // 0-based index of this step
    model.zero_grad();
    double loss = 0;
    // The mean over the global batch: each rank's share of the gradient is scaled by 1 / ranks
    // and the shares are summed, group by group as the last micro-batch's backward ends them.
    const float loss_scale = 1.0f / static_cast<float>(K * world.size);
    for (int k = 0; k < K; ++k) {
      sampler.fill(inputs, targets, s, k, first_row);
      if (k == K - 1) reducer.attach(model);
      loss += model.forward_backward(inputs.data(), targets.data(), B, T, loss_scale);
    }
    const auto wait_start = Clock::now();
    reducer.finish(model, inputs);
    const double reduce_wait_s = seconds_since(wait_start);
    loss = dist::sum(loss / K) / world.size;
    // The clipping is folded into the update (a pass over the gradients fewer).
    const double grad_norm = model.grad_norm();
    if (!std::isfinite(loss) || !std::isfinite(grad_norm))
      throw ValueError(str(!std::isfinite(loss) ? "the loss" : "the gradient norm", " became ",
                           !std::isfinite(loss) ? loss : grad_norm, " at step ", s + 1, "; training stopped, and '",
                           out.string(), "' keeps ", last_checkpoint(out)));
    const double lr = options.schedule.at(s);
    adamw.step(model.parameters(), lr, TrainableGPT2::clip_coefficient(grad_norm, options.grad_clip));
    state.step = s + 1;
    saved_last = evaluated_last = false;

    Record record;
    record.step = state.step;
    record.total_steps = total_steps;
    record.loss = loss;
    record.lr = lr;
    record.grad_norm = grad_norm;
    record.step_s = seconds_since(step_start);
    record.cpu_s = process_cpu_seconds() - cpu_start;
    record.tokens_per_s = static_cast<double>(windows_per_step * T) / record.step_s;
    record.elapsed_s = seconds_since(started);
    record.epoch = static_cast<double>(state.step * windows_per_step) / static_cast<double>(sampler.windows());
    if (world.size > 1) record.reduce_wait_s = reduce_wait_s;
    emit(record);

    if (!split.val.empty() && options.eval_every > 0 && state.step % options.eval_every == 0) {
      evaluate();
      evaluated_last = true;
    }
    if (options.save_every > 0 && state.step % options.save_every == 0) {
      save();
      saved_last = true;
    }
    if (dist::any(callbacks.stop_requested && callbacks.stop_requested()) && state.step < total_steps) {
      result.stopped = true;
      break;
    }
  }
  if (!split.val.empty() && !evaluated_last && !result.stopped) evaluate();
  if (dist::any(!saved_last || (root && inspect_out(out) != OutKind::run))) save();
  result.steps_done = state.step;
  return result;
}

}  // namespace

// A rank whose run fails takes the others down with it when it exits (dist::mark_failed), so
// none waits forever for it in a collective.
template <class Body>
RunResult on_every_rank(Body body) {
  try {
    return body();
  } catch (...) {
    dist::mark_failed();
    throw;
  }
}

RunResult finetune(const fs::path& model_dir, const std::vector<fs::path>& data, const fs::path& out,
                   const RunOptions& options, const RunCallbacks& callbacks) {
  return on_every_rank([&] {
    if (!fs::is_directory(model_dir)) throw Error(str("--model '", model_dir.string(), "' is not a directory"));
    return run({model_dir, model::Config::from_directory(model_dir), model_dir}, data, out, options, callbacks);
  });
}

RunResult train(const model::Config& config, const fs::path& tokenizer_dir, const std::vector<fs::path>& data,
                const fs::path& out, const RunOptions& options, const RunCallbacks& callbacks) {
  return on_every_rank([&] {
    config.validate("--config");
    return run({{}, config, tokenizer_dir}, data, out, options, callbacks);
  });
}

}  // namespace kael::train
