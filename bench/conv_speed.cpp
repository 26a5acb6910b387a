// Time of the convolution and pooling ops of PyTorch's MNIST example's Net (batch 64) through
// the C++ API, forward and forward + backward, each the median of --repeats runs. The Python
// comparison with torch is bench/mnist_vs_torch.py.
//
//   build/bench/conv_speed [threads] [repeats] [cpu]   (cpu: CPU time rather than wall time)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <functional>
#include <vector>

#include "kael/kael.hpp"

namespace {

// The median wall time, or with `cpu` the median CPU time of the process (all its threads): on a
// loaded machine the CPU time still says what the work costs.
double median_ms(int repeats, bool cpu, const std::function<void()>& run) {
  run();  // warm-up
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const auto wall = std::chrono::steady_clock::now();
    const std::clock_t start = std::clock();
    run();
    times.push_back(cpu ? 1000.0 * static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC
                        : std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 9;
  const bool cpu = argc > 3 && std::string(argv[3]) == "cpu";
  kael::set_num_threads(threads);
  kael::manual_seed(0);
  using kael::Tensor;
  const Tensor x1 = kael::randn({64, 1, 28, 28}), w1 = kael::randn({32, 1, 3, 3}), b1 = kael::randn({32});
  const Tensor x2 = kael::randn({64, 32, 26, 26}), w2 = kael::randn({64, 32, 3, 3}), b2 = kael::randn({64});
  const Tensor p = kael::randn({64, 64, 24, 24});
  std::printf("threads %d, median %s time of %d runs (ms)\n", threads, cpu ? "CPU" : "wall", repeats);
  const auto both = [&](const char* name, const std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>& op,
                        const Tensor& x, const Tensor& w, const Tensor& b) {
    const double fwd = median_ms(repeats, cpu, [&] { op(x, w, b); });
    const double total = median_ms(repeats, cpu, [&] {
      Tensor xs = x.detach().requires_grad_(), ws = w.detach().requires_grad_(), bs = b.detach().requires_grad_();
      kael::sum(op(xs, ws, bs)).backward();
    });
    std::printf("%-40s forward %8.2f   forward + backward %8.2f\n", name, fwd, total);
  };
  const auto conv = [](const Tensor& x, const Tensor& w, const Tensor& b) { return kael::conv2d(x, w, b); };
  both("conv2d (64,1,28,28) * (32,1,3,3)", conv, x1, w1, b1);
  both("conv2d (64,32,26,26) * (64,32,3,3)", conv, x2, w2, b2);
  const auto pool = [](const Tensor& x, const Tensor&, const Tensor&) { return kael::max_pool2d(x, {2, 2}); };
  both("max_pool2d (64,64,24,24), 2", pool, p, b1, b1);
  return 0;
}
