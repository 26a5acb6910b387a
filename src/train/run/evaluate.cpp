// The held-out loss, at step 0, every --eval-every steps and at the end.
#include <algorithm>

#include "train/dist/world.hpp"
#include "train/run/stages.hpp"

namespace kael::train {

namespace {

// Every window of `tokens` once, B at a time, each window weighing the same. The ranks share
// the batches (rank r takes every world.size-th from the r-th).
double validation_loss(GptNet& model, std::span<const std::int32_t> tokens, int B, int T,
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
    const std::size_t n = static_cast<std::size_t>(rows) * T;
    sum += static_cast<double>(model.evaluate(std::span(inputs).first(n), std::span(targets).first(n), rows, T)) * rows;
  }
  return dist::sum(sum) / static_cast<double>(windows);
}

}  // namespace

Record evaluate(const Plan& plan, GptNet& model, std::int64_t step) {
  Record record;
  record.kind = Record::Kind::eval;
  record.step = step;
  record.total_steps = plan.total_steps;
  record.val_loss = validation_loss(model, plan.split.val, plan.B, plan.T, plan.world);
  record.elapsed_s = std::chrono::duration<double>(RunClock::now() - plan.started).count();
  return record;
}

}  // namespace kael::train
