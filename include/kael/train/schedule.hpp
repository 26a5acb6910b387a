// The learning rate at each optimizer step.
#pragma once

#include <cstdint>
#include <string_view>

namespace kael::train {

enum class ScheduleKind { constant, cosine };
// "constant" / "cosine"; ValueError naming the choices otherwise.
ScheduleKind parse_schedule(std::string_view name);
const char* schedule_name(ScheduleKind kind);

// With lr the peak rate, W warmup steps, S total steps and s the 0-based step (as in llm.c):
//   s < W:      lr * (s + 1) / W                                  (both kinds)
//   constant:   lr
//   cosine:     min_lr + 0.5 * (1 + cos(pi * r)) * (lr - min_lr),  r = (s - W) / max(1, S - W)
// so cosine starts at lr right after warmup and reaches min_lr at s = S.
struct Schedule {
  ScheduleKind kind = ScheduleKind::constant;
  double lr = 1e-4;
  std::int64_t warmup = 0;
  double min_lr = 0.0;
  std::int64_t total_steps = 1;

  // ValueError for a negative or non-finite rate, min_lr above lr, or a negative warmup.
  void validate() const;
  double at(std::int64_t step) const;
};

}  // namespace kael::train
