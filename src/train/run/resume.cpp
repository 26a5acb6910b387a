// The resume stage: whether and from what state a run continues, in one place. A resumed run's
// weights, AdamW's moments and the counters come from OUT through rank 0; the window order and
// the dropout masks follow from the step, so no other data position is kept.
#include "kael/core/error.hpp"
#include "train/dist/agreement.hpp"
#include "train/run/stages.hpp"

namespace kael::train {

namespace fs = std::filesystem;

namespace {

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

}  // namespace

RunState resume(const Plan& plan) {
  const Source& source = plan.source;
  RunState state;
  state.total_steps = plan.total_steps;
  state.train_tokens = static_cast<std::int64_t>(plan.split.train.size());
  state.train_hash = plan.train_hash;
  state.source = source.model_dir.empty() ? "init" : fs::absolute(source.model_dir).string();
  if (plan.options.resume && plan.root) {
    const fs::path file = plan.out / kStateFile;
    check_resume_matches(file, plan.options, plan.world.size, state.train_tokens, plan.train_hash);
    const RunState saved = read_state(file);
    check_resume_source(saved, source, plan.out);
    if (saved.step > plan.total_steps)
      throw ValueError(str("--resume: the saved run is at step ", saved.step, ", beyond --steps ", plan.total_steps));
    state.step = saved.step;
    state.adamw_step = saved.adamw_step;
    state.dropout_counter = saved.dropout_counter;
    state.source = saved.source;
  }
  return state;
}

GptNet resumed_model(const Plan& plan) {
  return plan.root ? GptNet::load(plan.out, plan.options.dropout)
                   : GptNet::init(plan.source.config, plan.options.seed, plan.options.dropout);
}

void restore(const Plan& plan, RunState& state, Trainer& trainer) {
  GptNet& model = trainer.model;
  std::vector<ParameterMoments> moments = plan.root ? load_moments(plan.out, model) : zero_moments(model);
  if (plan.world.size > 1) {
    std::int64_t counters[] = {state.step, state.adamw_step, static_cast<std::int64_t>(state.dropout_counter)};
    std::vector<std::span<float>> buffers = model.values();
    for (ParameterMoments& m : moments)
      for (Tensor* t : {&m.exp_avg, &m.exp_avg_sq}) buffers.emplace_back(t->data<float>(), static_cast<std::size_t>(t->numel()));
    dist::share_from_rank0(buffers, counters);
    state.step = counters[0];
    state.adamw_step = counters[1];
    state.dropout_counter = static_cast<std::uint64_t>(counters[2]);
    for (NetParameter& p : model.parameters()) p.tensor.bump_version();
  }
  set_adamw_state(trainer.adamw, model, moments, state.adamw_step);
  trainer.adamw_step = state.adamw_step;
  trainer.dropout_counter = state.dropout_counter;
}

}  // namespace kael::train
