// The loss curve as a small text plot, for the end of `kael finetune` / `kael train`.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace kael::cli {

// Rows of text: a y axis with the highest and lowest loss, one column per group of consecutive
// steps (the mean of its losses marked with '*'), and the first and last step under it.
// Empty when there are fewer than two losses.
std::string loss_plot(std::span<const double> losses, std::int64_t first_step, int width = 60, int height = 10);

}  // namespace kael::cli
