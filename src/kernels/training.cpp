#include "kernels/training.hpp"

#include <algorithm>
#include <vector>

#include "kernels/dispatch/kernel_table.hpp"
#include "kernels/infra/thread_pool.hpp"

namespace kael::kernels {
namespace {

// sum_of_squares' blocks: their partial sums are added in order, so the result does not
// depend on how the blocks are shared among threads.
constexpr std::int64_t kSquaresBlock = std::int64_t{1} << 16;

}  // namespace

void adamw_update(float* param, float* m, float* v, const float* grad, std::int64_t n, const AdamWScalars& s) {
  const KernelTable& kt = active_kernels();
  // Seven memory streams an element: bound by memory bandwidth once vectorized.
  parallel_for(n, min_items_per_thread(8), [&](std::int64_t first, std::int64_t last) {
    kt.adamw_update(param + first, m + first, v + first, grad + first, last - first, s);
  });
}

double sum_of_squares(const float* x, std::int64_t n) {
  const KernelTable& kt = active_kernels();
  const std::int64_t blocks = (n + kSquaresBlock - 1) / kSquaresBlock;
  std::vector<double> partial(static_cast<std::size_t>(blocks));
  parallel_for(blocks, 1, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      const std::int64_t i = b * kSquaresBlock;
      partial[static_cast<std::size_t>(b)] = kt.sum_of_squares(x + i, std::min(kSquaresBlock, n - i));
    }
  });
  double total = 0;
  for (double s : partial) total += s;
  return total;
}

}  // namespace kael::kernels
