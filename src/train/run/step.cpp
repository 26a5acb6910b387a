// The step stage: one optimizer step of the global batch, from the micro-batches' gradients to
// the AdamW update at the schedule's rate.
#include <cmath>

#include "kael/core/cpu_clock.hpp"
#include "kael/core/error.hpp"
#include "train/dist/world.hpp"
#include "train/run/stages.hpp"

namespace kael::train {

namespace {

double seconds_since(RunClock::time_point start) {
  return std::chrono::duration<double>(RunClock::now() - start).count();
}

}  // namespace

StepBuffers::StepBuffers(const Plan& plan)
    : inputs(static_cast<std::size_t>(plan.B) * plan.T), targets(inputs.size()) {}

Record step(const Plan& plan, Trainer& trainer, StepBuffers& buffers, RunState& state) {
  const auto step_start = RunClock::now();
  const double cpu_start = process_cpu_seconds();
  const int B = plan.B, T = plan.T, K = plan.K, ranks = plan.world.size;
  TrainableGPT2& model = trainer.model;
  const std::int64_t s = state.step;  // 0-based index of this step
  model.zero_grad();
  double loss = 0;
  // The mean over the global batch: each rank's share of the gradient is scaled by 1 / ranks
  // and the shares are summed, group by group as the last micro-batch's backward ends them.
  const float loss_scale = 1.0f / static_cast<float>(K * ranks);
  for (int k = 0; k < K; ++k) {
    plan.sampler.fill(buffers.inputs, buffers.targets, s, k, plan.first_row);
    if (k == K - 1) buffers.reducer.attach(model);
    loss += model.forward_backward(buffers.inputs.data(), buffers.targets.data(), B, T, loss_scale);
  }
  const auto wait_start = RunClock::now();
  buffers.reducer.finish(model, buffers.inputs);
  const double reduce_wait_s = seconds_since(wait_start);
  loss = dist::sum(loss / K) / ranks;
  // The clipping is folded into the update (a pass over the gradients fewer).
  const double grad_norm = model.grad_norm();
  if (!std::isfinite(loss) || !std::isfinite(grad_norm))
    throw ValueError(str(!std::isfinite(loss) ? "the loss" : "the gradient norm", " became ",
                         !std::isfinite(loss) ? loss : grad_norm, " at step ", s + 1, "; training stopped, and '",
                         plan.out.string(), "' keeps ", last_checkpoint(plan.out)));
  const double lr = plan.options.schedule.at(s);
  trainer.adamw.step(model.parameters(), lr, TrainableGPT2::clip_coefficient(grad_norm, plan.options.grad_clip));
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
