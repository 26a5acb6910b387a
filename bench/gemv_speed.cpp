// A batch-1 product on GPT-2 small's 48 block matrices (340 MB in F32, past the caches):
// kernels::gemm on a torch-layout (out, in) weight read in place (the table's GEMV, what a
// tensor linear runs for one row) against linear_packed on the same weight packed at load (what
// the engine's decode runs), as GB/s of weights streamed, the best of `reps` passes over all the
// matrices, the two taken in turns. One JSON line.
// Usage: gemv_speed [threads] [reps, default 20]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/gemm.hpp"
#include "kernels/infra/thread_pool.hpp"

using namespace kael::kernels;

int main(int argc, char** argv) {
  set_num_threads(argc > 1 ? std::atoi(argv[1]) : 0);
  const int reps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 20;
  struct Shape {
    std::int64_t in, out;
  };
  std::vector<Shape> shapes;
  for (int layer = 0; layer < 12; ++layer)
    for (const Shape s : {Shape{768, 2304}, Shape{768, 768}, Shape{768, 3072}, Shape{3072, 768}}) shapes.push_back(s);
  std::vector<std::vector<float>> weights, packed;
  for (const Shape& s : shapes) {
    weights.emplace_back(static_cast<std::size_t>(s.in * s.out), 0.01f);
    packed.emplace_back(weights.back().size());
    // W^T (in, out) packed: the transposed view of the (out, in) weight.
    pack_panels_transposed(packed.back().data(), weights.back().data(), s.in, s.out);
  }
  std::vector<float> x(3072, 1.0f), y(3072);
  double bytes = 0;
  for (const Shape& s : shapes) bytes += 4.0 * static_cast<double>(s.in * s.out);
  const auto seconds = [](auto pass) {
    const auto start = std::chrono::steady_clock::now();
    pass();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  // In turns, so that a busy host slows both alike; the best pass of each.
  double in_place = 1e30, packed_rate = 1e30;
  for (int r = 0; r < reps; ++r) {
    in_place = std::min(in_place, seconds([&] {
      for (std::size_t i = 0; i < weights.size(); ++i)
        gemm(y.data(), shapes[i].out, x.data(), shapes[i].in, false, weights[i].data(), shapes[i].in, true, 1,
             shapes[i].out, shapes[i].in);
    }));
    packed_rate = std::min(packed_rate, seconds([&] {
      for (std::size_t i = 0; i < packed.size(); ++i)
        linear_packed(y.data(), x.data(), packed[i].data(), nullptr, 1, shapes[i].in, shapes[i].out);
    }));
  }
  in_place = bytes / in_place / 1e9;
  packed_rate = bytes / packed_rate / 1e9;
  std::printf("{\"threads\": %d, \"torch_layout_gb_s\": %.2f, \"packed_gb_s\": %.2f, \"ratio\": %.3f}\n", num_threads(),
              in_place, packed_rate, packed_rate / in_place);
  return 0;
}
