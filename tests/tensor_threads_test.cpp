// Autograd on several threads at once: backwards that share a leaf or a whole graph, reads of a
// gradient while others accumulate it, hooks and retain_grad, and in-place writes that share a
// version counter. Each
// expected gradient is the sum of the single-threaded ones. scripts/test.sh runs this file under
// ThreadSanitizer as well as AddressSanitizer.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"

namespace kael {
namespace {

constexpr int kThreads = 8;

// Runs body(thread index) on kThreads threads released together, and joins them.
template <class Body>
void on_threads(Body body) {
  std::atomic<int> waiting{kThreads};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      waiting.fetch_sub(1);
      while (waiting.load() > 0) std::this_thread::yield();
      body(i);
    });
  for (auto& t : threads) t.join();
}

// Small integers: every product and sum below is exact in float, whatever the order.
Tensor integers(Shape shape, std::int64_t seed) {
  manual_seed(static_cast<std::uint64_t>(seed));
  return randint(-3, 4, std::move(shape)).to(DType::F32);
}

// d/dw sum(x @ w * scale) = x^T @ full(scale): exact, so the sum over threads is exact too.
TEST(TensorThreadsAutograd, BackwardsOnASharedLeafAddUpEveryGradient) {
  constexpr int kRounds = 20;
  Tensor w = integers({24, 16}, 1).requires_grad_();
  std::vector<Tensor> inputs;
  for (int i = 0; i < kThreads; ++i) inputs.push_back(integers({8, 24}, 100 + i));
  std::atomic<bool> mismatch{false};
  on_threads([&](int i) {
    for (int round = 0; round < kRounds; ++round) {
      const Tensor loss = sum(mul(matmul(inputs[static_cast<std::size_t>(i)], w), 2.0));
      loss.backward();
      const Tensor seen = w.grad();  // read while the other threads accumulate
      if (!seen.defined() || seen.shape() != w.shape()) mismatch = true;
    }
  });
  EXPECT_FALSE(mismatch.load());
  Tensor expected = zeros({24, 16});
  for (const Tensor& x : inputs) expected = add(expected, mul(matmul(x.T(), ones({8, 16})), 2.0 * kRounds));
  EXPECT_EQ(w.grad().to_vector<float>(), expected.to_vector<float>());
}

// One graph, kept with retain_graph, walked by every thread at once: its nodes' saved values
// are read concurrently and must stay intact; the leaf gets kThreads * kRounds times the grad.
TEST(TensorThreadsAutograd, BackwardsThroughASharedRetainedGraph) {
  constexpr int kRounds = 10;
  manual_seed(7);
  Tensor w = randn({32, 32}).requires_grad_();
  Tensor b = randn({32}).requires_grad_();
  const Tensor x = randn({16, 32});
  const Tensor loss = sum(gelu(layer_norm(add(matmul(x, w), b), {32})));
  loss.backward(Tensor(), /*retain_graph=*/true);
  const std::vector<float> once_w = w.grad().to_vector<float>(), once_b = b.grad().to_vector<float>();
  w.zero_grad();
  b.zero_grad();
  on_threads([&](int) {
    for (int round = 0; round < kRounds; ++round) loss.backward(Tensor(), /*retain_graph=*/true);
  });
  const std::vector<float> all_w = w.grad().to_vector<float>(), all_b = b.grad().to_vector<float>();
  const double n = kThreads * kRounds;
  for (std::size_t k = 0; k < once_w.size(); ++k)
    ASSERT_NEAR(all_w[k], n * once_w[k], 1e-4 * n * (1 + std::abs(once_w[k]))) << k;
  for (std::size_t k = 0; k < once_b.size(); ++k)
    ASSERT_NEAR(all_b[k], n * once_b[k], 1e-4 * n * (1 + std::abs(once_b[k]))) << k;
}

// Without retain_graph the first backward frees the graph: exactly one thread gets through, the
// others get the "second time" error, and nothing is freed under a backward that runs.
TEST(TensorThreadsAutograd, OneOfManyBackwardsThroughAFreedGraphSucceeds) {
  for (int trial = 0; trial < 10; ++trial) {
    Tensor w = ones({64, 64}).requires_grad_();
    const Tensor loss = sum(relu(matmul(ones({8, 64}), w)));
    std::atomic<int> succeeded{0}, refused{0};
    on_threads([&](int) {
      try {
        loss.backward();
        ++succeeded;
      } catch (const ValueError&) {
        ++refused;
      }
    });
    EXPECT_EQ(succeeded.load(), 1);
    EXPECT_EQ(refused.load(), kThreads - 1);
    EXPECT_EQ(w.grad().to_vector<float>(), std::vector<float>(64 * 64, 8.0f));
  }
}

// Graphs built on several threads at once from one leaf, then dropped on those threads: the
// leaf's autograd state is shared by every graph, and each graph is freed exactly once.
TEST(TensorThreadsAutograd, GraphsBuiltAndFreedOnManyThreadsShareALeaf) {
  Tensor w = ones({4}).requires_grad_();
  on_threads([&](int) {
    for (int round = 0; round < 200; ++round) {
      Tensor y = w;
      for (int k = 0; k < 20; ++k) y = mul(y, 1.0);
      if (round % 2 == 0) sum(y).backward();
    }
  });
  EXPECT_EQ(w.grad().to_vector<float>(), std::vector<float>(4, kThreads * 100.0f));
}

// Hooks and retain_grad on a shared retained graph: every thread's backward runs the hooks
// (counted) and adds to the retained gradient, while other threads register more hooks on the
// same leaf and non-leaf; the registered lists are read under their lock, never half grown.
TEST(TensorThreadsAutograd, HooksAndRetainGradUnderConcurrentBackward) {
  constexpr int kRounds = 20;
  Tensor w = ones({16}).requires_grad_();
  const Tensor h = mul(w, 3.0);
  const Tensor loss = sum(mul(h, 2.0));
  std::atomic<int> leaf_calls{0}, inner_calls{0};
  autograd::register_hook(w, [&](const Tensor&) {
    ++leaf_calls;
    return Tensor();
  });
  autograd::register_hook(h, [&](const Tensor& g) {
    ++inner_calls;
    return g;
  });
  autograd::retain_grad(h);
  on_threads([&](int i) {
    for (int round = 0; round < kRounds; ++round) {
      if (i % 2 == 0) {
        autograd::register_hook(w, [](const Tensor&) { return Tensor(); });  // added while others run
        autograd::register_hook(h, [](const Tensor&) { return Tensor(); });
      }
      loss.backward(Tensor(), /*retain_graph=*/true);
    }
  });
  const int n = kThreads * kRounds;
  EXPECT_EQ(leaf_calls.load(), n);
  EXPECT_EQ(inner_calls.load(), n);
  EXPECT_EQ(h.grad().to_vector<float>(), std::vector<float>(16, 2.0f * n));
  EXPECT_EQ(w.grad().to_vector<float>(), std::vector<float>(16, 6.0f * n));
}

// In-place writes to disjoint rows of one storage bump its one version counter: none is lost.
TEST(TensorThreadsAutograd, InPlaceWritesOnManyThreadsCountEveryVersion) {
  constexpr int kWrites = 500;
  Tensor storage = zeros({kThreads, 4});
  const std::uint64_t before = storage.version();
  on_threads([&](int i) {
    Tensor row = storage.select(0, i);
    for (int k = 0; k < kWrites; ++k) row.add_(ones({4}));
  });
  EXPECT_EQ(storage.version() - before, static_cast<std::uint64_t>(kThreads) * kWrites);
  EXPECT_EQ(storage.to_vector<float>(), std::vector<float>(kThreads * 4, static_cast<float>(kWrites)));
}

}  // namespace
}  // namespace kael
