// The step stage: one optimizer step of the global batch, from the micro-batches' gradients
// (nn::GPT's forward and autograd's backward) to the AdamW update at the schedule's rate.
#include <cmath>
#include <limits>

#include "kael/core/cpu_clock.hpp"
#include "kael/core/error.hpp"
#include "kael/optim/clip_grad.hpp"
#include "train/dist/world.hpp"
#include "train/run/stages.hpp"

namespace kael::train {

namespace {

double seconds_since(RunClock::time_point start) {
  return std::chrono::duration<double>(RunClock::now() - start).count();
}

// Each micro-batch takes this many dropout streams (one per dropout of its forward): stream
// counter * kStreamsPerMicroBatch + site, the numbering runs have used since before they moved
// onto nn::GPT, so a checkpoint's dropout counter resumes the same masks.
constexpr std::uint64_t kStreamsPerMicroBatch = 1 << 16;

}  // namespace

StepBuffers::StepBuffers(const Plan& plan, GptNet& model)
    : reducer(model), inputs(static_cast<std::size_t>(plan.B) * plan.T), targets(inputs.size()) {}

Record step(const Plan& plan, Trainer& trainer, StepBuffers& buffers, RunState& state) {
  const auto step_start = RunClock::now();
  const double cpu_start = process_cpu_seconds();
  const int B = plan.B, T = plan.T, K = plan.K, ranks = plan.world.size;
  GptNet& model = trainer.model;
  const std::int64_t s = state.step;  // 0-based index of this step
  trainer.adamw.zero_grad();
  double loss = 0;
  // The mean over the global batch: each rank's share of the gradient is scaled by 1 / ranks
  // and the shares are summed, bucket by bucket as the last micro-batch's backward ends them.
  const float loss_scale = 1.0f / static_cast<float>(K * ranks);
  for (int k = 0; k < K; ++k) {
    plan.sampler.fill(buffers.inputs, buffers.targets, s, k, plan.first_row);
    if (k == K - 1) buffers.reducer.arm(buffers.inputs);
    const DropoutDraw dropout{plan.options.seed, trainer.dropout_counter * kStreamsPerMicroBatch, plan.first_row};
    loss += model.forward_backward(buffers.inputs, buffers.targets, B, T, loss_scale, dropout);
    ++trainer.dropout_counter;
  }
  const auto wait_start = RunClock::now();
  buffers.reducer.finish();
  const double reduce_wait_s = seconds_since(wait_start);
  loss = dist::sum(loss / K) / ranks;
  // torch's clip_grad_norm_ (without --grad-clip only the norm, which the record reports).
  const double max_norm = plan.options.grad_clip > 0 ? plan.options.grad_clip : std::numeric_limits<double>::infinity();
  const double grad_norm = optim::clip_grad_norm_(trainer.adamw.params(), max_norm);
  if (!std::isfinite(loss) || !std::isfinite(grad_norm))
    throw ValueError(str(!std::isfinite(loss) ? "the loss" : "the gradient norm", " became ",
                         !std::isfinite(loss) ? loss : grad_norm, " at step ", s + 1, "; training stopped, and '",
                         plan.out.string(), "' keeps ", last_checkpoint(plan.out)));
  const double lr = plan.options.schedule.at(s);
  trainer.adamw.set_lr(lr);
  trainer.adamw.step();
  ++trainer.adamw_step;
  state.step = s + 1;

  Record record;
  record.step = state.step;
  record.total_steps = plan.total_steps;
  record.loss = loss;
  record.lr = lr;
  record.grad_norm = grad_norm;
  record.step_s = seconds_since(step_start);
  record.cpu_s = process_cpu_seconds() - cpu_start;
  record.tokens_per_s = static_cast<double>(plan.windows_per_step * T) / record.step_s;
  record.elapsed_s = seconds_since(plan.started);
  record.epoch = static_cast<double>(state.step * plan.windows_per_step) / static_cast<double>(plan.sampler.windows());
  if (ranks > 1) record.reduce_wait_s = reduce_wait_s;
  return record;
}

}  // namespace kael::train
