#include "cli/loss_plot.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace kael::cli {

std::string loss_plot(std::span<const double> losses, std::int64_t first_step, int width, int height) {
  if (losses.size() < 2) return {};
  const auto columns = std::min<std::size_t>(static_cast<std::size_t>(width), losses.size());
  std::vector<double> means(columns);
  for (std::size_t c = 0; c < columns; ++c) {  // column c averages steps [begin, end)
    const std::size_t begin = c * losses.size() / columns, end = (c + 1) * losses.size() / columns;
    double sum = 0;
    for (std::size_t i = begin; i < end; ++i) sum += losses[i];
    means[c] = sum / static_cast<double>(end - begin);
  }
  const double top = *std::max_element(means.begin(), means.end());
  const double bottom = *std::min_element(means.begin(), means.end());
  const double span = top > bottom ? top - bottom : 1.0;

  std::vector<std::string> grid(static_cast<std::size_t>(height), std::string(columns, ' '));
  for (std::size_t c = 0; c < columns; ++c) {
    const int row = static_cast<int>((top - means[c]) / span * (height - 1) + 0.5);
    grid[static_cast<std::size_t>(row)][c] = '*';
  }
  std::string out = "loss\n";
  char label[32];
  for (int row = 0; row < height; ++row) {
    if (row == 0 || row == height - 1) {
      std::snprintf(label, sizeof(label), "%8.4f |", row == 0 ? top : bottom);
    } else {
      std::snprintf(label, sizeof(label), "%8s |", "");
    }
    out += label;
    out += grid[static_cast<std::size_t>(row)];
    out += '\n';
  }
  out += std::string(9, ' ') + '+' + std::string(columns, '-') + '\n';
  const std::string first = "step " + std::to_string(first_step);
  const std::string last = std::to_string(first_step + static_cast<std::int64_t>(losses.size()) - 1);
  std::string axis = std::string(10, ' ') + first;
  const std::size_t right = 10 + columns;  // where the last column ends
  if (axis.size() + 1 + last.size() <= right) {
    axis += std::string(right - axis.size() - last.size(), ' ') + last;
  } else {
    axis += " - " + last;
  }
  out += axis + '\n';
  return out;
}

}  // namespace kael::cli
