// Speed of the linear kernels on GPT-2 small's shapes, per instruction set: GEMV (decode, one
// row, reported as GB/s of weights streamed), and GEMM (T rows, GFLOP/s). Both wall-clock and
// per-CPU-second figures are printed, the latter holds on a machine shared with other work.
// Usage: kernel_speed [threads] [isa: scalar|avx2]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "kernels/cpu_features.hpp"
#include "kernels/gemm.hpp"
#include "kernels/thread_pool.hpp"

using namespace kael::kernels;

namespace {

double cpu_now() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}
double wall_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : physical_cores();
  if (argc > 2) set_isa(std::string(argv[2]) == "avx2" ? Isa::avx2 : Isa::scalar);
  set_num_threads(threads);
  // One GPT-2 small layer's four matrices, 12 times over: 340 MB, far beyond the caches.
  const std::int64_t C = 768, layers = 12;
  const std::int64_t shapes[4][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}};
  std::vector<std::vector<float>> weights;
  for (std::int64_t l = 0; l < layers; ++l)
    for (auto& s : shapes) weights.emplace_back(static_cast<std::size_t>(s[0] * s[1]), 0.01f);
  std::vector<float> bias(4 * C, 0.0f), inp(512 * 4 * C, 0.5f), out(512 * 4 * C);
  double bytes = 0, flops_per_row = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    bytes += 4.0 * static_cast<double>(weights[i].size());
    flops_per_row += 2.0 * static_cast<double>(weights[i].size());
  }
  std::printf("isa %s, threads %d, weights %.0f MB\n", isa_name(active_isa()), threads, bytes / 1e6);
  for (std::int64_t T : {1, 2, 4, 16, 64, 128, 256, 512}) {
    double best_wall = 1e30, best_cpu = 1e30;
    for (int repeat = 0; repeat < (T <= 16 ? 10 : 3); ++repeat) {
      const double w0 = wall_now(), c0 = cpu_now();
      for (std::size_t i = 0; i < weights.size(); ++i) {
        const auto& s = shapes[i % 4];
        linear_packed(out.data(), inp.data(), weights[i].data(), bias.data(), T, s[0], s[1]);
      }
      const double w = wall_now() - w0, c = cpu_now() - c0;
      if (w < best_wall) best_wall = w;
      if (c < best_cpu) best_cpu = c;
    }
    const double flops = flops_per_row * static_cast<double>(T);
    std::printf("T=%4ld  %8.2f ms  %7.1f GB/s  %7.1f GFLOP/s wall  %7.1f GFLOP/s per core (cpu time)\n",
                static_cast<long>(T), best_wall * 1e3, bytes / best_wall / 1e9, flops / best_wall / 1e9,
                flops / best_cpu / 1e9);
  }
  return 0;
}
