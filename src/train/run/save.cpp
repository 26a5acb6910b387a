// The save stage: a checkpoint of the run so far, swapped into OUT whole (save_checkpoint).
#include "kael/core/error.hpp"
#include "kael/core/file.hpp"
#include "kael/core/json.hpp"
#include "kael/text/tokenizer.hpp"
#include "train/dist/agreement.hpp"
#include "train/run/stages.hpp"

namespace kael::train {

namespace fs = std::filesystem;

CheckpointText checkpoint_text(const Plan& plan) {
  const Source& source = plan.source;
  CheckpointText text;
  const fs::path source_config = source.model_dir / "config.json";
  // A fine-tuned model keeps its source's config.json (keys kael does not read included), but its
  // weights are F32 whatever the source's were.
  if (!source.model_dir.empty() && fs::exists(source_config)) {
    auto doc = json::parse_ordered(read_regular_file(source_config, "config", model::kMaxConfigBytes),
                                   str("'", source_config.string(), "'"));
    doc["torch_dtype"] = "float32";
    text.config_json = doc.dump(2) + "\n";
  } else {
    text.config_json = source.config.to_json("float32");
  }
  text.vocab_json = read_regular_file(plan.vocab, "tokenizer file", text::kMaxTokenizerFileBytes);
  text.merges_txt = read_regular_file(plan.merges, "tokenizer file", text::kMaxTokenizerFileBytes);
  return text;
}

// Collective: every rank checks the weights agree; rank 0 writes.
void save(const Plan& plan, Trainer& trainer, RunState& state, CheckpointText& text) {
  dist::check_weights_agree(trainer.model.values(), plan.world, state.step);
  if (!plan.root) return;
  state.adamw_step = trainer.adamw_step;
  state.dropout_counter = trainer.dropout_counter;
  text.state_json = state_json(state, plan.options, plan.world.size);
  try {
    save_checkpoint(plan.out, trainer.model, trainer.adamw, text);
  } catch (const ValueError& e) {  // a weight that is not finite; nothing was written
    throw ValueError(str("the weights became non-finite at step ", state.step, " (", e.what(),
                         "); training stopped, and '", plan.out.string(), "' keeps ", last_checkpoint(plan.out)));
  }
}

std::string last_checkpoint(const fs::path& out) {
  if (inspect_out(out) != OutKind::run) return "what it held before (this run saved no checkpoint)";
  try {
    return str("its last checkpoint, from step ", read_state(out / kStateFile).step);
  } catch (const Error&) {
    return "its last checkpoint";
  }
}

}  // namespace kael::train
