// The fast kernels against their scalar references (src/kernels/reference/reference.cpp) on ragged
// sizes that hit every tail: below, at and above each block width, on every instruction set
// (each one this CPU lacks skipped by name), with 1 and several threads.
#include <time.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/embedding.hpp"
#include "kernels/linear.hpp"
#include "kernels/norm.hpp"
#include "kernels/infra/thread_pool.hpp"
#include "kernels/reference/layer_norm.hpp"
#include "kernels_testing.hpp"

using namespace kael::kernels;

namespace {

using test_util::max_error;
using test_util::random_vector;

using Kernels = test_util::OnEveryIsa;

const std::int64_t kRagged[] = {1, 3, 15, 16, 17, 63, 64, 65, 130};

}  // namespace

TEST_P(Kernels, LinearMatchesReference) {
  for (std::int64_t T : {1, 2, 4, 5, 9})
    for (std::int64_t C : {1, 7, 64, 100})
      for (std::int64_t OC : kRagged)
        for (bool with_bias : {true, false}) {
          auto inp = random_vector(T * C, 1), w = random_vector(C * OC, 2), b = random_vector(OC, 3);
          std::vector<float> fast(T * OC, NAN), slow(T * OC, NAN);
          linear(fast.data(), inp.data(), w.data(), with_bias ? b.data() : nullptr, T, C, OC);
          ref::linear(slow.data(), inp.data(), w.data(), with_bias ? b.data() : nullptr, T, C, OC);
          ASSERT_LT(max_error(fast, slow), 1e-5) << "T=" << T << " C=" << C << " OC=" << OC;
        }
}

TEST_P(Kernels, LinearRowsDoNotDependOnBatch) {
  // Prefill (many rows) and decode (one row) must give bitwise equal rows.
  const std::int64_t T = 7, C = 50, OC = 130;
  auto inp = random_vector(T * C, 4), w = random_vector(C * OC, 5), b = random_vector(OC, 6);
  std::vector<float> all(T * OC), one(OC);
  linear(all.data(), inp.data(), w.data(), b.data(), T, C, OC);
  for (std::int64_t t = 0; t < T; ++t) {
    linear(one.data(), inp.data() + t * C, w.data(), b.data(), 1, C, OC);
    ASSERT_TRUE(std::equal(one.begin(), one.end(), all.begin() + t * OC)) << "row " << t;
  }
}

TEST_P(Kernels, LinearLargeMatchesReference) {
  const std::int64_t T = 13, C = 768, OC = 2304 + 5;
  auto inp = random_vector(T * C, 7), w = random_vector(C * OC, 8, 0.05f), b = random_vector(OC, 9);
  std::vector<float> fast(T * OC), slow(T * OC);
  linear(fast.data(), inp.data(), w.data(), b.data(), T, C, OC);
  ref::linear(slow.data(), inp.data(), w.data(), b.data(), T, C, OC);
  EXPECT_LT(max_error(fast, slow), 1e-5);
}

TEST_P(Kernels, LayerNormMatchesReference) {
  for (std::int64_t T : {1, 3, 40})
    for (std::int64_t C : kRagged) {
      // A large common offset checks the two-pass variance.
      auto inp = random_vector(T * C, 12), w = random_vector(C, 13), b = random_vector(C, 14);
      for (float& x : inp) x += 1000.0f;
      std::vector<float> fast(T * C), slow(T * C);
      layer_norm(fast.data(), inp.data(), w.data(), b.data(), T, C, 1e-5f);
      ref::layer_norm<float>(slow.data(), nullptr, nullptr, inp.data(), w.data(), b.data(), T, C, 1e-5f);
      ASSERT_LT(max_error(fast, slow), 2e-3) << "T=" << T << " C=" << C;
      // Saving the mean and rstd gives the same rows, and the reference's statistics.
      std::vector<float> saved(T * C), mean(T), rstd(T), want_mean(T), want_rstd(T);
      layer_norm(saved.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), T, C, 1e-5f);
      ref::layer_norm<float>(slow.data(), want_mean.data(), want_rstd.data(), inp.data(), w.data(), b.data(), T, C,
                             1e-5f);
      ASSERT_EQ(saved, fast);
      ASSERT_LT(max_error(mean, want_mean), 1e-6) << "T=" << T << " C=" << C;
      for (std::int64_t t = 0; t < T; ++t) ASSERT_NEAR(rstd[t], want_rstd[t], 1e-3 * want_rstd[t]) << "C=" << C;
      // In place gives the same.
      layer_norm(inp.data(), inp.data(), w.data(), b.data(), T, C, 1e-5f);
      ASSERT_EQ(inp, fast);
    }
}

TEST_P(Kernels, LayerNormWithoutWeightOrBiasMatchesReference) {
  const std::int64_t T = 5;
  for (std::int64_t C : kRagged)
    for (int affine = 0; affine < 3; ++affine) {  // neither, weight only, bias only
      const auto inp = random_vector(T * C, 15), w = random_vector(C, 16), b = random_vector(C, 17);
      const float* weight = affine == 1 ? w.data() : nullptr;
      const float* bias = affine == 2 ? b.data() : nullptr;
      std::vector<float> fast(T * C), slow(T * C);
      layer_norm(fast.data(), inp.data(), weight, bias, T, C, 1e-5f);
      ref::layer_norm<float>(slow.data(), nullptr, nullptr, inp.data(), weight, bias, T, C, 1e-5f);
      ASSERT_LT(max_error(fast, slow), 1e-5) << "C=" << C << " affine=" << affine;
    }
}

TEST_P(Kernels, LayerNormBackwardMatchesReference) {
  for (std::int64_t T : {1, 3, 31, 32, 33, 70})  // around the 32-row blocks of the parameter sums
    for (std::int64_t C : kRagged)
      for (bool with_weight : {true, false}) {
        const auto inp = random_vector(T * C, 18, 2.0f), w = random_vector(C, 19), dout = random_vector(T * C, 20);
        const float* weight = with_weight ? w.data() : nullptr;
        std::vector<float> out(T * C), mean(T), rstd(T);
        layer_norm(out.data(), mean.data(), rstd.data(), inp.data(), weight, nullptr, T, C, 1e-5f);
        // The outputs accumulate: start both from the same nonzero values.
        auto dinp = random_vector(T * C, 21), dw = random_vector(C, 22), db = random_vector(C, 23);
        auto want_dinp = dinp, want_dw = dw, want_db = db;
        layer_norm_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), weight, mean.data(),
                            rstd.data(), T, C);
        ref::layer_norm_backward<float>(want_dinp.data(), want_dw.data(), want_db.data(), dout.data(), inp.data(),
                                        weight, mean.data(), rstd.data(), T, C);
        ASSERT_LT(max_error(dinp, want_dinp), 1e-5) << "T=" << T << " C=" << C;
        ASSERT_LT(max_error(dw, want_dw), 1e-5) << "T=" << T << " C=" << C;
        ASSERT_LT(max_error(db, want_db), 1e-5) << "T=" << T << " C=" << C;
        // Null parameter gradients are left out; dinp comes out the same.
        std::vector<float> alone(T * C, 0.0f), with_sums(T * C, 0.0f), sums(2 * C, 0.0f);
        layer_norm_backward(alone.data(), nullptr, nullptr, dout.data(), inp.data(), weight, mean.data(), rstd.data(),
                            T, C);
        layer_norm_backward(with_sums.data(), sums.data(), sums.data() + C, dout.data(), inp.data(), weight,
                            mean.data(), rstd.data(), T, C);
        ASSERT_EQ(alone, with_sums);
      }
}

TEST_P(Kernels, LayerNormBackwardDoesNotDependOnThreads) {
  const std::int64_t T = 100, C = 65;
  const auto inp = random_vector(T * C, 24), w = random_vector(C, 25), dout = random_vector(T * C, 26);
  std::vector<float> out(T * C), mean(T), rstd(T);
  layer_norm(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), nullptr, T, C, 1e-5f);
  const auto run = [&] {
    std::vector<float> grads((T + 2) * C, 0.0f);  // dinp, then dw, then db
    layer_norm_backward(grads.data(), grads.data() + T * C, grads.data() + (T + 1) * C, dout.data(), inp.data(),
                        w.data(), mean.data(), rstd.data(), T, C);
    return grads;
  };
  const auto here = run();
  set_num_threads(1);
  const auto one = run();
  set_num_threads(std::get<1>(GetParam()));
  ASSERT_EQ(here, one);
}

TEST_P(Kernels, CrossEntropyRowMatchesReference) {
  for (std::int64_t V : kRagged)
    for (std::int64_t target : {std::int64_t{0}, V / 2, V - 1, std::int64_t{-1}}) {
      const auto logits = random_vector(V, 27, 8.0f);  // wide: exp would overflow without the max shift
      std::vector<float> fast(V, NAN), slow(V, NAN);
      const float loss = cross_entropy_row(fast.data(), logits.data(), target, 0.25f, V);
      const float want = ref::cross_entropy_row(slow.data(), logits.data(), target, 0.25f, V);
      ASSERT_NEAR(loss, want, 1e-5 * (1 + std::abs(want))) << "V=" << V << " target=" << target;
      ASSERT_LT(max_error(fast, slow), 1e-6) << "V=" << V << " target=" << target;
      // The loss alone, and in place, give the same bits.
      ASSERT_EQ(cross_entropy_row(nullptr, logits.data(), target, 0.25f, V), loss);
      auto in_place = logits;
      ASSERT_EQ(cross_entropy_row(in_place.data(), in_place.data(), target, 0.25f, V), loss);
      ASSERT_EQ(in_place, fast);
      if (target < 0) {
        ASSERT_EQ(loss, 0.0f);
      }
    }
}

TEST_P(Kernels, SoftmaxMatchesReferenceAndSumsToOne) {
  for (std::int64_t n : kRagged) {
    auto inp = random_vector(n, 15, 30.0f);  // wide: exp would overflow without the max shift
    std::vector<float> fast(n), slow(n);
    softmax(fast.data(), inp.data(), n);
    ref::softmax(slow.data(), inp.data(), n);
    ASSERT_LT(max_error(fast, slow), 1e-6) << "n=" << n;
    double sum = 0.0;
    for (float p : fast) sum += p;
    ASSERT_NEAR(sum, 1.0, 1e-5);
  }
}

TEST_P(Kernels, GeluMatchesReference) {
  for (std::int64_t n : {1, 17, 20000}) {
    auto inp = random_vector(n, 16, 4.0f);
    inp[0] = 0.0f;
    std::vector<float> fast(n), slow(n);
    gelu_new(fast.data(), inp.data(), n);
    ref::gelu_new(slow.data(), inp.data(), n);
    ASSERT_LT(max_error(fast, slow), 1e-6) << "n=" << n;
  }
  // Known values of 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))).
  const float x[] = {0.0f, 1.0f, -1.0f, 3.0f};
  float y[4];
  gelu_new(y, x, 4);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_NEAR(y[1], 0.8411920f, 1e-6);
  EXPECT_NEAR(y[2], -0.1588080f, 1e-6);
  EXPECT_NEAR(y[3], 2.9963627f, 1e-6);
}

TEST_P(Kernels, EmbeddingAndAdd) {
  const std::int64_t V = 11, P = 9, C = 17, T = 4, pos0 = 5;
  auto wte = random_vector(V * C, 17), wpe = random_vector(P * C, 18);
  const std::int32_t tokens[T] = {3, 0, 10, 3};
  std::vector<float> fast(T * C), slow(T * C);
  embedding(fast.data(), tokens, wte.data(), wpe.data(), T, C, pos0);
  ref::embedding(slow.data(), tokens, wte.data(), wpe.data(), T, C, pos0);
  ASSERT_EQ(fast, slow);
  EXPECT_EQ(fast[2 * C + 1], wte[10 * C + 1] + wpe[7 * C + 1]);
  auto y = random_vector(T * C, 19);
  add_inplace(fast.data(), y.data(), T * C);
  ref::add_inplace(slow.data(), y.data(), T * C);
  ASSERT_EQ(fast, slow);
}

TEST_P(Kernels, AttentionMatchesReference) {
  for (std::int64_t n_head : {1, 3})
    for (std::int64_t head_dim : {1, 16, 20, 64})
      for (std::int64_t pos0 : {0, 1, 70})
        for (std::int64_t T : {1, 2, 33}) {
          const std::int64_t C = n_head * head_dim, q_stride = 3 * C, kv_stride = C + 3;  // padded rows
          auto q = random_vector(T * q_stride, 20);
          auto k = random_vector((pos0 + T) * kv_stride, 21, 2.0f), v = random_vector((pos0 + T) * kv_stride, 22);
          std::vector<float> scratch(attention_scratch_size(T, pos0, n_head)), fast(T * C), slow(T * C);
          causal_attention(fast.data(), scratch.data(), q.data(), k.data(), v.data(), T, pos0, n_head, head_dim,
                           q_stride, kv_stride);
          ref::causal_attention(slow.data(), scratch.data(), q.data(), k.data(), v.data(), T, pos0, n_head,
                                head_dim, q_stride, kv_stride);
          ASSERT_LT(max_error(fast, slow), 1e-5)
              << "heads=" << n_head << " head_dim=" << head_dim << " pos0=" << pos0 << " T=" << T;
        }
}

TEST_P(Kernels, AttentionFirstPositionCopiesValue) {
  // A query at position 0 sees only itself: softmax of one score is 1, so out = v[0].
  const std::int64_t n_head = 2, head_dim = 5, C = n_head * head_dim;
  auto q = random_vector(C, 23), k = random_vector(C, 24), v = random_vector(C, 25);
  std::vector<float> scratch(attention_scratch_size(1, 0, n_head)), out(C);
  causal_attention(out.data(), scratch.data(), q.data(), k.data(), v.data(), 1, 0, n_head, head_dim, C, C);
  for (std::int64_t i = 0; i < C; ++i) EXPECT_FLOAT_EQ(out[i], v[i]);
}

INSTANTIATE_TEST_SUITE_P(IsaThreads, Kernels, test_util::every_isa_and_threads(), test_util::isa_threads_name);

TEST(ThreadPool, CoversEveryIndexOnceAndNests) {
  for (int threads : {1, 2, 5}) {
    set_num_threads(threads);
    EXPECT_EQ(num_threads(), threads);
    for (std::int64_t n : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
      parallel_for(n, 1, [&](std::int64_t first, std::int64_t last) {
        // A nested call runs serially on the calling thread instead of deadlocking.
        parallel_for(last - first, 1, [&](std::int64_t a, std::int64_t b) {
          for (std::int64_t i = first + a; i < first + b; ++i) ++hits[static_cast<std::size_t>(i)];
        });
      });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1);
    }
  }
  set_num_threads(0);
}

// Jobs of every part count in a row, so that workers without a part in one job are still
// finishing the last or still asleep when the next is published: each job's indices are each
// covered once, and each by the part that owns them.
TEST(ThreadPool, BackToBackJobsOfEveryWidth) {
  set_num_threads(8);
  std::vector<std::atomic<int>> hits(64);
  for (int round = 0; round < 2000; ++round) {
    const std::int64_t n = 1 + round % 16;  // 1..16 items: 1..8 parts
    parallel_for(n, 2, [&](std::int64_t first, std::int64_t last) {
      for (std::int64_t i = first; i < last; ++i) hits[static_cast<std::size_t>(i)].fetch_add(1);
    });
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<std::size_t>(i)].exchange(0), 1) << round;
    if (round % 500 == 499) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // workers go to sleep
  }
  set_num_threads(0);
}

// A decode product streams its weights: it splits over every thread once each share streams
// enough bytes, where counting multiply-adds alone kept a (768, 768) product on 2 threads.
TEST(ThreadPool, DecodeProductsSplitByTheBytesTheyStream) {
  constexpr std::int64_t C = 768, panel_macs = C * 16, panel_bytes = C * 16 * 4;
  EXPECT_EQ(min_items_per_thread(panel_macs), 21);
  EXPECT_EQ(min_product_items_per_thread(panel_macs, panel_bytes), 1);
  EXPECT_EQ(min_product_items_per_thread(512 * panel_macs, panel_bytes), 1);  // a prefill's
  EXPECT_EQ(min_product_items_per_thread(64 * 16, 64 * 16 * 4), 16);           // a tiny product stays whole

  set_num_threads(8);
  const auto x = random_vector(C, 31), w = random_vector(C * C, 32);
  std::vector<float> y(C);
  const kael::ThreadBusy before = thread_busy();
  count_thread_busy(true);
  linear(y.data(), x.data(), w.data(), nullptr, 1, C, C);
  count_thread_busy(false);
  kael::ThreadBusy busy = thread_busy();
  busy -= before;
  EXPECT_EQ(busy.calls, 1);
  EXPECT_EQ(busy.parts, 8) << "the 48 panels split in eight ranges";
  set_num_threads(0);
}

// Spins on the calling thread for about `ms` of its CPU time.
void burn_cpu_ms(double ms) {
  const auto cpu_ms = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return 1e3 * static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_nsec);
  };
  const double end = cpu_ms() + ms;
  while (cpu_ms() < end) {
  }
}

TEST(ThreadPool, CountsEachThreadsCpuTimeOnlyWhenAsked) {
  set_num_threads(2);
  const kael::ThreadBusy before = thread_busy();
  parallel_for(2, 1, [](std::int64_t, std::int64_t) { burn_cpu_ms(2); });
  kael::ThreadBusy off = thread_busy();
  off -= before;
  EXPECT_EQ(off.calls, 0);  // not counting: nothing recorded

  count_thread_busy(true);
  // Thread 0 (the caller) gets 30 ms of work, thread 1 gets 10 ms: busiest / mean = 3 / 2.
  parallel_for(2, 1, [](std::int64_t first, std::int64_t) { burn_cpu_ms(first == 0 ? 30 : 10); });
  parallel_for(1, 1, [](std::int64_t, std::int64_t) { burn_cpu_ms(5); });  // too small to split
  count_thread_busy(false);
  kael::ThreadBusy on = thread_busy();
  on -= before;
  EXPECT_EQ(on.calls, 1);
  EXPECT_EQ(on.parts, 2);
  EXPECT_EQ(on.serial_calls, 1);
  ASSERT_GE(on.task_cpu_ms.size(), 2u);  // as many as the widest pool counted so far
  for (std::size_t i = 2; i < on.task_cpu_ms.size(); ++i) EXPECT_EQ(on.task_cpu_ms[i], 0) << i;  // two threads only
  // Whichever thread took which range (the caller takes the first unless the worker is
  // quicker): one thread did 30 ms and the other 10.
  std::vector<double> shares(on.task_cpu_ms.begin(), on.task_cpu_ms.begin() + 2);
  std::sort(shares.begin(), shares.end());
  EXPECT_NEAR(shares[1], 30, 3);
  EXPECT_NEAR(shares[0], 10, 3);
  EXPECT_NEAR(on.serial_cpu_ms, 5, 2);
  EXPECT_GE(on.serial_ms, on.serial_cpu_ms * 0.9);
  EXPECT_NEAR(on.serial_idle_ms, on.serial_ms, 1e-9) << "one other thread waited beside the serial call";
  EXPECT_NEAR(on.imbalance(), 1.5, 0.15);
  EXPECT_GE(on.caller_wait_ms, 0);
  EXPECT_NEAR(on.sync_ms(), on.worker_start_ms + on.caller_wait_ms + on.serial_idle_ms, 1e-9);
  set_num_threads(0);
}


