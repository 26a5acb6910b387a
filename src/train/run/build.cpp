// The build stage: the model and its optimizer, ready for the first step.
#include "train/dist/agreement.hpp"
#include "train/run/stages.hpp"

namespace kael::train {

Trainer build(const Plan& plan, RunState& state) {
  const RunOptions& options = plan.options;
  const Source& source = plan.source;
  // A resumed run's weights come from OUT, which rank 0 reads and sends to the others.
  TrainableGPT2 model = options.resume               ? resumed_model(plan)
                        : source.model_dir.empty() ? TrainableGPT2::init(source.config, options.seed)
                                                   : TrainableGPT2::load(source.model_dir);
  if (plan.world.size > 1) {
    dist::Fingerprint mine = plan.fingerprint;
    if (!options.resume) mine.model ^= dist::weights_hash(model.flat_values());
    dist::check_ranks_agree(mine, plan.world);
  }
  model.set_dropout({options.dropout, options.seed});
  model.set_precision(options.precision);
  model.set_first_row(plan.first_row);
  AdamW adamw(model.parameters(), options.adamw);
  Trainer trainer{std::move(model), std::move(adamw)};
  if (options.resume) restore(plan, state, trainer);
  trainer.model.reserve(plan.B, plan.T);
  return trainer;
}

}  // namespace kael::train
