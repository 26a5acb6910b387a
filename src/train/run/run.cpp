// The training run: its stages (stages.hpp) in order, and the loop that steps, evaluates, saves
// and stops.
#include "kael/train/run.hpp"

#include "kael/core/error.hpp"
#include "train/dist/world.hpp"
#include "train/run/log_file.hpp"
#include "train/run/stages.hpp"

namespace kael::train {

namespace fs = std::filesystem;

namespace {

// The plan that on_start reports, before any record.
RunResult planned_result(const Plan& plan, const GptNet& model) {
  RunResult result;
  result.ranks = plan.world.size;
  result.rank = plan.world.rank;
  result.threads = model::num_threads();
  result.global_batch = plan.B * plan.world.size;
  result.total_steps = plan.total_steps;
  result.train_tokens = static_cast<std::int64_t>(plan.split.train.size());
  result.windows = plan.sampler.windows();
  result.tokens_from_cache = plan.stream.from_cache;
  result.parameters = model.parameter_count();
  result.activation_bytes = model.activation_bytes(plan.B, plan.T);
  return result;
}

RunResult run(const Source& source, const std::vector<fs::path>& data, const fs::path& out, RunOptions options,
              const RunCallbacks& callbacks) {
  const Plan plan = prepare(source, data, out, std::move(options));
  const RunOptions& o = plan.options;
  RunState state = resume(plan);
  Trainer trainer = build(plan, state);
  CheckpointText text = checkpoint_text(plan);

  LogFile log(plan.root ? o.log_json : fs::path(), o.resume);
  RunResult result = planned_result(plan, trainer.model);
  const auto emit = [&](const Record& record) {
    result.history.push_back(record);
    if (!plan.root) return;
    log.write(record);
    if (callbacks.on_record) callbacks.on_record(record);
  };
  if (plan.root && callbacks.on_start) callbacks.on_start(result);

  StepBuffers buffers(plan, trainer.model);
  const bool evaluating = !plan.split.val.empty() && o.eval_every > 0;
  if (evaluating && state.step == 0) emit(evaluate(plan, trainer.model, state.step));  // the loss to improve on
  bool saved_last = true, evaluated_last = true;
  while (state.step < plan.total_steps) {
    const Record record = step(plan, trainer, buffers, state);
    saved_last = evaluated_last = false;
    emit(record);
    if (evaluating && state.step % o.eval_every == 0) {
      emit(evaluate(plan, trainer.model, state.step));
      evaluated_last = true;
    }
    if (o.save_every > 0 && state.step % o.save_every == 0) {
      save(plan, trainer, state, text);
      saved_last = true;
    }
    if (dist::any(callbacks.stop_requested && callbacks.stop_requested()) && state.step < plan.total_steps) {
      result.stopped = true;
      break;
    }
  }
  if (!plan.split.val.empty() && !evaluated_last && !result.stopped) emit(evaluate(plan, trainer.model, state.step));
  if (dist::any(!saved_last || (plan.root && inspect_out(out) != OutKind::run))) save(plan, trainer, state, text);
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
