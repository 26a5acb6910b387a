// The training step's kernels of linear layers, embeddings, residual adds and dropout
// (kernels/linear_train.hpp, embedding.hpp, elementwise.hpp) against their plain references on
// ragged sizes and 1 or 2 threads, and the references (in double) against central finite
// differences of a scalar loss L = sum(out * G) for a random G on tiny shapes. Its attention
// and output head have tests of their own (kernels_attention_train_test.cpp, kernels_training_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/family/scalar_math.hpp"
#include "kernels/gemm_bf16.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/embedding.hpp"
#include "kernels/infra/thread_pool.hpp"
#include "kernels/linear_train.hpp"
#include "kernels/random.hpp"
#include "kernels/reference/embedding.hpp"
#include "kernels/reference/layer_norm.hpp"
#include "kernels/reference/linear_train.hpp"
#include "kernels_testing.hpp"

namespace kael::kernels {
namespace {

using test_util::expect_gradient;
using test_util::random_ids;
using test_util::random_values;
using test_util::relative_error;
using test_util::weighted_sum;


// Each test body runs at 1 and 2 threads.
class TrainStepKernels : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { set_num_threads(GetParam()); }
  void TearDown() override { set_num_threads(0); }
};

TEST_P(TrainStepKernels, LinearMatchesReference) {
  for (auto [M, K, N] : {std::tuple{37, 29, 53}, {1, 17, 16}, {130, 200, 33}, {5, 300, 129}}) {
    const auto inp = random_values<float>(M * K, 1), w = random_values<float>(K * N, 2),
               bias = random_values<float>(N, 3), dout = random_values<float>(M * N, 4);
    std::vector<float> out(M * N), want(M * N), scratch(K * N);
    linear_forward(out.data(), scratch.data(), inp.data(), w.data(), bias.data(), M, K, N, /*bf16=*/false);
    ref::linear_forward(want.data(), inp.data(), w.data(), bias.data(), M, K, N);
    EXPECT_LT(relative_error(out, want), 1e-5) << M << " " << K << " " << N;

    // dinp is overwritten; dw and db accumulate onto what is there.
    std::vector<float> dinp(M * K, 7.0f), want_dinp(M * K);
    auto dw = random_values<float>(K * N, 5), db = random_values<float>(N, 6);
    auto want_dw = dw, want_db = db;
    linear_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), M, K, N,
                             /*bf16=*/false);
    ref::linear_backward_input(want_dinp.data(), dout.data(), w.data(), M, K, N);
    ref::linear_backward_weight(want_dw.data(), want_db.data(), inp.data(), dout.data(), M, K, N);
    EXPECT_LT(relative_error(dinp, want_dinp), 1e-5);
    EXPECT_LT(relative_error(dw, want_dw), 1e-5);
    EXPECT_LT(relative_error(db, want_db), 1e-5);
  }
}

TEST_P(TrainStepKernels, EmbeddingMatchesReference) {
  const std::int64_t B = 3, T = 19, C = 70, V = 23;
  const auto ids = random_ids(B * T, V, 1);  // repeated ids: the scatter adds
  const auto wte = random_values<float>(V * C, 2), wpe = random_values<float>(T * C, 3),
             dx = random_values<float>(B * T * C, 4);
  std::vector<float> x(B * T * C), want(B * T * C);
  embedding_forward(x.data(), ids.data(), wte.data(), wpe.data(), B, T, C);
  ref::embedding_forward(want.data(), ids.data(), wte.data(), wpe.data(), B, T, C);
  EXPECT_EQ(x, want);
  auto dwte = random_values<float>(V * C, 5), dwpe = random_values<float>(T * C, 6);
  auto want_dwte = dwte, want_dwpe = dwpe;
  embedding_backward(dwte.data(), dwpe.data(), dx.data(), ids.data(), B, T, C);
  ref::embedding_backward(want_dwte.data(), want_dwpe.data(), dx.data(), ids.data(), B, T, C);
  EXPECT_EQ(dwte, want_dwte);
  EXPECT_EQ(dwpe, want_dwpe);
}

// At bf16 one call converts dout once for both products: within BF16's rounding of the F32
// reference (about 1% of the largest value at worst) and not at F32's (the BF16 products ran).
TEST_P(TrainStepKernels, LinearBackwardAtBf16IsWithinBf16OfReference) {
  if (!gemm_bf16_available()) GTEST_SKIP() << "no BF16 product on this CPU";
  for (auto [M, K, N] : {std::tuple{37, 29, 53}, {130, 200, 33}, {64, 96, 128}}) {
    const auto inp = random_values<float>(M * K, 21), w = random_values<float>(K * N, 22),
               dout = random_values<float>(M * N, 23);
    std::vector<float> dinp(M * K), want_dinp(M * K), dw(K * N), want_dw(K * N), db(N), want_db(N);
    linear_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), M, K, N,
                             /*bf16=*/true);
    ref::linear_backward_input(want_dinp.data(), dout.data(), w.data(), M, K, N);
    ref::linear_backward_weight(want_dw.data(), want_db.data(), inp.data(), dout.data(), M, K, N);
    for (const auto& [name, got, want] : {std::tuple{"dinp", &dinp, &want_dinp}, std::tuple{"dw", &dw, &want_dw}}) {
      EXPECT_LT(relative_error(*got, *want), 2e-2) << name << " " << M << " " << K << " " << N;
      EXPECT_GT(relative_error(*got, *want), 1e-5) << name << " " << M << " " << K << " " << N;
    }
    EXPECT_LT(relative_error(db, want_db), 1e-5);  // the bias sums stay in F32
  }
}

TEST_P(TrainStepKernels, AddMatchesTheSumOnEveryElement) {
  const std::int64_t n = 3 * (std::int64_t{1} << 14) + 5;  // split over two threads, with a ragged end
  const auto x = random_values<float>(n, 1), y = random_values<float>(n, 2);
  std::vector<float> out(n);
  add(out.data(), x.data(), y.data(), n);
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], x[i] + y[i]) << i;
  std::vector<float> in_place = x;
  add(in_place.data(), in_place.data(), y.data(), n);
  EXPECT_EQ(in_place, out);
}

TEST_P(TrainStepKernels, ScaleMultipliesEveryElement) {
  const std::int64_t n = 3 * (std::int64_t{1} << 14) + 5;
  const auto x = random_values<float>(n, 3);
  std::vector<float> y = x;
  scale(y.data(), 0.37f, n);
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], x[i] * 0.37f) << i;
}

TEST_P(TrainStepKernels, DropoutKeepsAboutOneMinusPAndScales) {
  const std::int64_t n = 100000;
  std::vector<float> x(n, 1.0f);
  const DropoutMask mask{0.25f, 3, 9};
  dropout(x.data(), mask, n);
  const auto kept = std::count(x.begin(), x.end(), 1.0f / 0.75f);
  EXPECT_EQ(kept + std::count(x.begin(), x.end(), 0.0f), n);
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.75, 0.01);
  std::vector<float> y(n, 1.0f);
  dropout(y.data(), mask, n);
  EXPECT_EQ(x, y) << "a mask is a function of (seed, stream, index)";
}

INSTANTIATE_TEST_SUITE_P(Threads, TrainStepKernels, ::testing::Values(1, 2));

// ---- references against finite differences, in double ----

TEST(TrainStepReference, LinearGradients) {
  const std::int64_t M = 3, K = 4, N = 5;
  auto inp = random_values<double>(M * K, 1), w = random_values<double>(K * N, 2), b = random_values<double>(N, 3);
  const auto g = random_values<double>(M * N, 4);
  const auto loss = [&] {
    std::vector<double> out(M * N);
    ref::linear_forward(out.data(), inp.data(), w.data(), b.data(), M, K, N);
    return weighted_sum(out, g);
  };
  std::vector<double> dinp(M * K), dw(K * N), db(N);
  ref::linear_backward_input(dinp.data(), g.data(), w.data(), M, K, N);
  ref::linear_backward_weight(dw.data(), db.data(), inp.data(), g.data(), M, K, N);
  expect_gradient(inp, loss, dinp, "inp");
  expect_gradient(w, loss, dw, "w");
  expect_gradient(b, loss, db, "bias");
}

TEST(TrainStepReference, LayerNormGradients) {
  const std::int64_t M = 3, C = 7;
  auto inp = random_values<double>(M * C, 1, 2.0), w = random_values<double>(C, 2, 0.3, 1.0),
       b = random_values<double>(C, 3);
  const auto g = random_values<double>(M * C, 4);
  std::vector<double> mean(M), rstd(M);
  const auto loss = [&] {
    std::vector<double> out(M * C);
    ref::layer_norm(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), M, C, 1e-5);
    return weighted_sum(out, g);
  };
  loss();
  std::vector<double> dinp(M * C), dw(C), db(C);
  ref::layer_norm_backward(dinp.data(), dw.data(), db.data(), g.data(), inp.data(), w.data(), mean.data(), rstd.data(),
                          M, C);
  expect_gradient(inp, loss, dinp, "inp");
  expect_gradient(w, loss, dw, "w");
  expect_gradient(b, loss, db, "b");
}

TEST(TrainStepReference, GeluGradient) {  // the scalar rules every GELU kernel shares (scalar_math.hpp)
  auto inp = random_values<double>(50, 1, 3.0);
  const auto g = random_values<double>(50, 2);
  const auto loss = [&] {
    std::vector<double> out(50);
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = gelu_tanh(inp[i]);
    return weighted_sum(out, g);
  };
  std::vector<double> dinp(50);
  for (std::size_t i = 0; i < dinp.size(); ++i) dinp[i] = g[i] * gelu_tanh_derivative(inp[i]);
  expect_gradient(inp, loss, dinp, "inp");
}

TEST(TrainStepReference, EmbeddingGradients) {
  const std::int64_t B = 2, T = 3, C = 4, V = 5;
  const std::vector<std::int32_t> ids{1, 3, 1, 0, 1, 4};
  auto wte = random_values<double>(V * C, 1), wpe = random_values<double>(T * C, 2);
  const auto g = random_values<double>(B * T * C, 3);
  const auto loss = [&] {
    std::vector<double> x(B * T * C);
    ref::embedding_forward(x.data(), ids.data(), wte.data(), wpe.data(), B, T, C);
    return weighted_sum(x, g);
  };
  std::vector<double> dwte(V * C), dwpe(T * C);
  ref::embedding_backward(dwte.data(), dwpe.data(), g.data(), ids.data(), B, T, C);
  expect_gradient(wte, loss, dwte, "wte");
  expect_gradient(wpe, loss, dwpe, "wpe");
}

}  // namespace
}  // namespace kael::kernels
