// The build stage: the model and its optimizer, ready for the first step.
#include <utility>

#include "kael/tensor/precision.hpp"
#include "train/dist/agreement.hpp"
#include "train/run/stages.hpp"

namespace kael::train {

namespace {

// AdamW with weight decay on the 2-D parameters only (GPT-2's matrices and embeddings, not the
// biases and layer norms), as nanoGPT and transformers' examples group them.
optim::AdamW make_adamw(GptNet& model, const AdamWOptions& options) {
  optim::ParamGroup<optim::AdamWOptions> decayed, plain;
  for (const NetParameter& p : model.parameters()) (p.weight_decay ? decayed : plain).params.push_back(p.tensor);
  decayed.options = {.lr = 0.0, .betas = {options.beta1, options.beta2}, .eps = options.eps,
                     .weight_decay = options.weight_decay};
  plain.options = decayed.options;
  plain.options.weight_decay = 0.0;
  std::vector<optim::ParamGroup<optim::AdamWOptions>> groups;
  groups.push_back(std::move(decayed));
  if (!plain.params.empty()) groups.push_back(std::move(plain));
  return optim::AdamW(std::move(groups));
}

}  // namespace

MatmulPrecisionScope::MatmulPrecisionScope(Precision precision) {
  if (precision != Precision::bf16) return;
  previous_ = get_float32_matmul_precision();
  set_float32_matmul_precision("medium");
}

MatmulPrecisionScope::MatmulPrecisionScope(MatmulPrecisionScope&& other) noexcept
    : previous_(std::exchange(other.previous_, {})) {}

MatmulPrecisionScope::~MatmulPrecisionScope() {
  if (!previous_.empty()) set_float32_matmul_precision(previous_);
}

Trainer build(const Plan& plan, RunState& state) {
  const RunOptions& options = plan.options;
  const Source& source = plan.source;
  // A resumed run's weights come from OUT, which rank 0 reads and sends to the others.
  GptNet model = options.resume               ? resumed_model(plan)
                 : source.model_dir.empty() ? GptNet::init(source.config, options.seed, options.dropout)
                                            : GptNet::load(source.model_dir, options.dropout);
  if (plan.world.size > 1) {
    dist::Fingerprint mine = plan.fingerprint;
    if (!options.resume) mine.model ^= dist::weights_hash(model.values());
    dist::check_ranks_agree(mine, plan.world);
  }
  optim::AdamW adamw = make_adamw(model, options.adamw);
  Trainer trainer{std::move(model), std::move(adamw), MatmulPrecisionScope(options.precision)};
  if (options.resume) restore(plan, state, trainer);
  return trainer;
}

}  // namespace kael::train
