#include "train/run/run_state.hpp"

#include <nlohmann/json.hpp>

#include "kael/core/error.hpp"
#include "kael/core/file.hpp"
#include "kael/core/json.hpp"

namespace kael::train {

namespace {

using nlohmann::json;

constexpr std::uint64_t kMaxStateBytes = 1 << 20;  // options and counters: a few KiB

// The options that decide which weights a step produces, under their command-line names. The
// batch is the global one: --batch sequences on each of `ranks` processes.
json trajectory_options(const RunOptions& options, int ranks) {
  return json{{"batch", options.batch * ranks},
              {"seq", options.seq},
              {"accum", options.accum},
              {"lr", options.schedule.lr},
              {"schedule", schedule_name(options.schedule.kind)},
              {"warmup", options.schedule.warmup},
              {"min-lr", options.schedule.min_lr},
              {"weight-decay", options.adamw.weight_decay},
              {"beta1", options.adamw.beta1},
              {"beta2", options.adamw.beta2},
              {"eps", options.adamw.eps},
              {"grad-clip", options.grad_clip},
              {"dropout", options.dropout},
              {"seed", options.seed},
              {"order", order_name(options.order)},
              {"val-fraction", options.val_fraction},
              {"precision", precision_name(options.precision)}};
}

// What a state written before an option existed implies for it.
json implied_option(const std::string& name) { return name == "precision" ? json("f32") : json(); }

json parse_state(const std::filesystem::path& file) {
  try {
    json doc = kael::json::parse(read_regular_file(file, "training state", kMaxStateBytes), str("training state '", file.string(), "'"));
    if (!doc.is_object() || doc.value("format", "") != "kael-training-state")
      throw ValueError("not a kael training state");
    return doc;
  } catch (const json::exception& e) {
    throw ValueError(str("training state '", file.string(), "' is malformed: ", e.what()));
  }
}

}  // namespace

std::string state_json(const RunState& state, const RunOptions& options, int ranks) {
  json doc{{"format", "kael-training-state"},
           {"version", 1},
           {"ranks", ranks},
           {"step", state.step},
           {"total_steps", state.total_steps},
           {"adamw_step", state.adamw_step},
           {"dropout_counter", state.dropout_counter},
           {"train_tokens", state.train_tokens},
           {"train_hash", state.train_hash},
           {"source", state.source},
           {"options", trajectory_options(options, ranks)}};
  return doc.dump(2) + "\n";
}

RunState read_state(const std::filesystem::path& file) {
  const json doc = parse_state(file);
  try {
    RunState state;
    state.step = doc.at("step").get<std::int64_t>();
    state.total_steps = doc.at("total_steps").get<std::int64_t>();
    state.adamw_step = doc.at("adamw_step").get<std::int64_t>();
    state.dropout_counter = doc.at("dropout_counter").get<std::uint64_t>();
    state.train_tokens = doc.at("train_tokens").get<std::int64_t>();
    state.train_hash = doc.at("train_hash").get<std::uint64_t>();
    state.source = doc.at("source").get<std::string>();
    if (state.step < 0 || state.adamw_step < 0) throw ValueError("negative step");
    return state;
  } catch (const std::exception& e) {
    throw ValueError(str("training state '", file.string(), "' is malformed: ", e.what()));
  }
}

std::string trajectory_text(const RunOptions& options, int ranks) { return trajectory_options(options, ranks).dump(); }

void check_resume_matches(const std::filesystem::path& file, const RunOptions& options, int ranks,
                          std::int64_t train_tokens, std::uint64_t train_hash) {
  const json saved = parse_state(file).value("options", json::object());
  const json now = trajectory_options(options, ranks);
  for (const auto& [name, value] : now.items()) {
    const auto found = saved.find(name);
    const json then = found != saved.end() ? *found : implied_option(name);
    if (then == value) continue;
    if (name == "batch" && ranks > 1)
      throw ValueError(str("--resume: the global batch (--batch ", options.batch, " x ", ranks, " ranks) is ",
                           value.dump(), " but the saved run used ", then.is_null() ? "none" : then.dump(),
                           "; give a --batch and rank count whose product is that"));
    throw ValueError(str("--resume: --", name, " is ", value.dump(), " but the saved run used ",
                         then.is_null() ? "none" : then.dump(), "; resume with the same value",
                         name == "batch" ? " (with several ranks, their product with --batch)" : ""));
  }
  const RunState state = read_state(file);
  if (state.train_tokens != train_tokens || state.train_hash != train_hash)
    throw ValueError(str("--resume: the training data differ from the saved run's (", train_tokens,
                         " tokens now, ", state.train_tokens, " then); resume with the same --data"));
}

}  // namespace kael::train
