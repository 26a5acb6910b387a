// The tensor library's overheads against what it is built on, in one run:
//   (a) kael::matmul against kernels::gemm called directly at GPT-2 shapes (the ratio is the
//       cost of the Tensor layer: allocation, operand checks, autograd bookkeeping);
//   (b) add / mul / exp / sigmoid / tanh / sum over 16M F32 elements, and add with a broadcast
//       row (a bias) and with a transposed operand (4096 x 4096), in GB/s (bytes the op must
//       move: reads + writes; best of 20 runs each), against a read-bandwidth probe on the
//       pool's threads (bench/read_probe.hpp, as bench/bandwidth.cpp: each thread sums its own
//       slice; best of 20 passes, before and after the ops, the larger kept), and add against
//       a plain-store loop in turns;
//   (c) cross_entropy (1024, 50257) and layer_norm (8192, 768), forward and forward + backward;
//   (d) autograd bookkeeping: a chain of small adds with requires_grad minus the same chain
//       under NoGradGuard, per op, and the backward per op.
// One JSON object per line (bench/tensor_vs_torch.py reads them), after a "cpu" line.
// Usage: tensor_speed [threads, default kael's]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "kernels/gemm.hpp"
#include "kernels/infra/thread_pool.hpp"
#include "read_probe.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// The best of `reps` runs of f, in seconds (after one warm-up run).
template <class F>
double best_seconds(int reps, F&& f) {
  f();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

// The best of `reps` runs of f and of g, run in turns (after one warm-up run each), so that the
// machine's load changing over the runs weighs on both alike.
template <class F, class G>
std::pair<double, double> best_seconds_in_turns(int reps, F&& f, G&& g) {
  f();
  g();
  double best_f = 1e30, best_g = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    f();
    best_f = std::min(best_f, std::chrono::duration<double>(Clock::now() - t0).count());
    t0 = Clock::now();
    g();
    best_g = std::min(best_g, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return {best_f, best_g};
}

// One pass of the read-bandwidth probe over `floats` floats, one slice per pool thread.
void read_pass(const float* buffer, std::int64_t floats) {
  const int threads = kael::kernels::num_threads();
  std::vector<float> sink(static_cast<std::size_t>(threads) * 16);
  kael::kernels::parallel_for(threads, 1, [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t begin = floats * t / threads, end = floats * (t + 1) / threads;
      sink[static_cast<std::size_t>(t) * 16] = kael::bench::read_sum(buffer + begin, end - begin);
    }
  });
  if (sink[0] == 12345.0f) std::printf("#\n");  // keeps the sums
}

void matmul_vs_gemm(std::int64_t M, std::int64_t K, std::int64_t N) {
  const kael::Tensor a = kael::randn({M, K}), b = kael::randn({K, N});
  std::vector<float> c(static_cast<std::size_t>(M * N));
  const auto [direct, tensor] = best_seconds_in_turns(
      9, [&] { kael::kernels::gemm(c.data(), N, a.data<float>(), K, false, b.data<float>(), N, false, M, N, K); },
      [&] { kael::matmul(a, b); });
  const double gflop = 2.0 * static_cast<double>(M * N * K) / 1e9;
  std::printf("{\"bench\": \"matmul\", \"shape\": \"(%lldx%lld)@(%lldx%lld)\", \"kael_ms\": %.3f, \"gemm_ms\": %.3f, "
              "\"kael_gflops\": %.1f, \"gemm_gflops\": %.1f, \"ratio\": %.3f}\n",
              static_cast<long long>(M), static_cast<long long>(K), static_cast<long long>(K), static_cast<long long>(N),
              tensor * 1e3, direct * 1e3, gflop / tensor, gflop / direct, tensor / direct);
}

// The read bandwidth in GB/s over `input`: the best of 20 passes.
double read_bandwidth(const kael::Tensor& input) {
  const double seconds = best_seconds(20, [&] { read_pass(input.data<float>(), input.numel()); });
  return static_cast<double>(input.nbytes()) / seconds / 1e9;
}

// One elementwise op that moves `bytes` in `seconds`, against the read bandwidth `bound_gbs`.
void elementwise(const char* name, double bytes, double bound_gbs, double seconds) {
  const double gbs = bytes / seconds / 1e9;
  std::printf("{\"bench\": \"elementwise\", \"op\": \"%s\", \"ms\": %.3f, \"gb_s\": %.2f, \"read_bw_gb_s\": %.2f, "
              "\"ratio_to_bw\": %.3f}\n",
              name, seconds * 1e3, gbs, bound_gbs, gbs / bound_gbs);
}

// kael::add against the loop STREAM calls "add" (c = a + b with plain stores, on the pool's
// threads, into a buffer written before), timed in turns: a store first reads its line into
// the cache, so a plain-store add moves a third more than its named bytes, and this loop shows
// what that leaves of the read bandwidth on this machine.
void add_vs_stream_loop(const kael::Tensor& a, const kael::Tensor& b) {
  const std::int64_t n = a.numel();
  std::vector<float> c(static_cast<std::size_t>(n), 0.0f);
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  const auto [loop, tensor] = best_seconds_in_turns(
      20,
      [&] {
        kael::kernels::parallel_for(n, 1 << 16, [&](std::int64_t i0, std::int64_t i1) {
          for (std::int64_t i = i0; i < i1; ++i) c[static_cast<std::size_t>(i)] = pa[i] + pb[i];
        });
      },
      [&] { kael::add(a, b); });
  const double bytes = 3.0 * static_cast<double>(a.nbytes());
  std::printf("{\"bench\": \"add_vs_stream_loop\", \"kael_ms\": %.3f, \"loop_ms\": %.3f, \"kael_gb_s\": %.2f, "
              "\"loop_gb_s\": %.2f, \"ratio\": %.3f}\n",
              tensor * 1e3, loop * 1e3, bytes / tensor / 1e9, bytes / loop / 1e9, tensor / loop);
}

void autograd_overhead() {
  constexpr int kOps = 2000;
  const kael::Tensor leaf = kael::randn({16}).requires_grad_();
  const auto chain = [&] {
    kael::Tensor x = leaf;
    for (int i = 0; i < kOps; ++i) x = x + 1.0;
    return x;
  };
  const double recorded = best_seconds(5, [&] { chain(); });
  const double plain = best_seconds(5, [&] {
    const kael::autograd::NoGradGuard no_grad;
    chain();
  });
  kael::Tensor out;
  const double backward = best_seconds(5, [&] {
    out = kael::sum(chain());
    out.backward();
  }) - recorded;
  std::printf("{\"bench\": \"autograd\", \"ops\": %d, \"numel\": 16, \"with_grad_us_per_op\": %.3f, "
              "\"no_grad_us_per_op\": %.3f, \"bookkeeping_us_per_op\": %.3f, \"backward_us_per_op\": %.3f}\n",
              kOps, recorded / kOps * 1e6, plain / kOps * 1e6, (recorded - plain) / kOps * 1e6, backward / kOps * 1e6);
}

// cross_entropy over GPT-2's vocabulary and layer_norm at GPT-2 small's width (with weight and
// bias): the forward alone (under NoGradGuard) and forward plus backward, best of 7 each.
void row_ops() {
  const auto report = [](const char* op, const char* shape, double forward, double both) {
    std::printf("{\"bench\": \"row_op\", \"op\": \"%s\", \"shape\": \"%s\", \"forward_ms\": %.3f, "
                "\"forward_backward_ms\": %.3f}\n",
                op, shape, forward * 1e3, both * 1e3);
  };
  const kael::Tensor logits = kael::randn({1024, 50257}).requires_grad_(), target = kael::randint(0, 50257, {1024});
  report("cross_entropy", "(1024, 50257)", best_seconds(7, [&] {
           const kael::autograd::NoGradGuard no_grad;
           kael::cross_entropy(logits, target);
         }),
         best_seconds(7, [&] { kael::cross_entropy(logits, target).backward(); }));
  const kael::Tensor x = kael::randn({8192, 768}).requires_grad_(), w = kael::ones({768}).requires_grad_(),
                     b = kael::zeros({768}).requires_grad_();
  report("layer_norm", "(8192, 768)", best_seconds(7, [&] {
           const kael::autograd::NoGradGuard no_grad;
           kael::layer_norm(x, {768}, w, b);
         }),
         best_seconds(7, [&] { kael::sum(kael::layer_norm(x, {768}, w, b)).backward(); }));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) kael::kernels::set_num_threads(std::atoi(argv[1]));
  std::printf("{\"cpu\": \"%s\", \"threads\": %d}\n", cpu_model().c_str(), kael::kernels::num_threads());
  kael::manual_seed(0);
  matmul_vs_gemm(1024, 768, 2304);
  matmul_vs_gemm(1024, 768, 3072);
  matmul_vs_gemm(1024, 3072, 768);

  constexpr std::int64_t n = std::int64_t{1} << 24;  // 16M floats, 64 MB a tensor
  const kael::Tensor a = kael::randn({n}), b = kael::randn({n});
  // The probe before and after the ops, the larger kept: the stricter bound.
  const double first_probe = read_bandwidth(a);
  const double bytes = static_cast<double>(n) * 4;
  const kael::Tensor square = a.view({4096, 4096}), bias = kael::randn({4096}), other = b.view({4096, 4096});
  const std::pair<const char*, double> moved[] = {{"add", 3}, {"mul", 3}, {"mul_scalar", 2}, {"exp", 2}, {"sigmoid", 2},
                                                  {"tanh", 2}, {"sum", 1}, {"add_bias_row", 2}, {"add_transposed", 3}};
  const std::function<void()> run[] = {[&] { kael::add(a, b); },
                                       [&] { kael::mul(a, b); },
                                       [&] { kael::mul(a, 0.5); },
                                       [&] { kael::exp(a); },
                                       [&] { kael::sigmoid(a); },
                                       [&] { kael::tanh(a); },
                                       [&] { kael::sum(a); },
                                       [&] { kael::add(square, bias); },
                                       [&] { kael::add(square.T(), other); }};
  std::vector<double> seconds;
  for (const auto& op : run) seconds.push_back(best_seconds(20, op));
  const double bound = std::max(first_probe, read_bandwidth(a));
  for (std::size_t k = 0; k < seconds.size(); ++k) elementwise(moved[k].first, moved[k].second * bytes, bound, seconds[k]);
  add_vs_stream_loop(a, b);
  row_ops();
  autograd_overhead();
  return 0;
}
