#include "kael/train/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "kael/core/error.hpp"

namespace kael::train {

ScheduleKind parse_schedule(std::string_view name) {
  if (name == "constant") return ScheduleKind::constant;
  if (name == "cosine") return ScheduleKind::cosine;
  throw ValueError(str("unknown schedule '", name, "': expected constant or cosine"));
}

const char* schedule_name(ScheduleKind kind) { return kind == ScheduleKind::constant ? "constant" : "cosine"; }

void Schedule::validate() const {
  if (!std::isfinite(lr) || lr < 0) throw ValueError(str("--lr must be a finite non-negative number, got ", lr));
  if (!std::isfinite(min_lr) || min_lr < 0 || min_lr > lr)
    throw ValueError(str("--min-lr must be between 0 and --lr (", lr, "), got ", min_lr));
  if (warmup < 0) throw ValueError(str("--warmup must not be negative, got ", warmup));
}

double Schedule::at(std::int64_t step) const {
  if (step < warmup) return lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  if (kind == ScheduleKind::constant) return lr;
  const double ratio = static_cast<double>(step - warmup) / static_cast<double>(std::max<std::int64_t>(1, total_steps - warmup));
  return min_lr + 0.5 * (1.0 + std::cos(std::numbers::pi * std::min(1.0, ratio))) * (lr - min_lr);
}

}  // namespace kael::train
