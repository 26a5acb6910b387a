// The training kernels the training step and the tensor library share: causal attention with
// dropout (attention_train.hpp) and the fused output head with cross-entropy
// (cross_entropy.hpp), against their plain references on ragged sizes on every instruction
// set, and the references (in double) against central finite differences of a scalar loss
// L = sum(out * G) for a random G on tiny shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/attention_train.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/gemm_bf16.hpp"
#include "kernels/random.hpp"
#include "kernels/reference/attention_train.hpp"
#include "kernels/reference/cross_entropy.hpp"
#include "kernels_testing.hpp"

namespace kael::kernels {
namespace {

using test_util::expect_gradient;
using test_util::random_ids;
using test_util::random_values;
using test_util::relative_error;
using test_util::weighted_sum;


using TrainingAttention = test_util::OnEveryIsa;

// Within one of the backward's 64-row blocks and past them (its dv and dk gather the blocks'
// terms), T ragged against the 16-wide panels and the 24-row blocks, head sizes the products
// read in place (32, 64), copy (20) and odd ones; with and without dropout; in the training
// step's layout (q, k, v side by side in rows of 3C) and in three separate (B, T, hd) tensors.
TEST_P(TrainingAttention, MatchesReference) {
  for (auto [B, T, NH, hd] : {std::tuple{3, 37, 3, 20}, {2, 150, 2, 32}, {1, 130, 3, 20}, {1, 64, 1, 64},
                              {2, 19, 1, 7}, {1, 45, 2, 13}, {2, 1, 3, 5}})
    for (float p : {0.0f, 0.3f})
      for (bool packed : {true, false}) {
        // packed: one qkv buffer, rows of 3C. Else B * NH separate sequences of one head each.
        const std::int64_t C = NH * hd, b = packed ? B : B * NH, nh = packed ? NH : 1, ld = packed ? 3 * C : hd;
        const std::int64_t width = packed ? 3 * C : hd, rows = b * T;
        const DropoutMask dropout{p, 11, 5, 3};
        const auto qkv = random_values<float>(3 * rows * width, 1), dout = random_values<float>(B * T * C, 2);
        const float* q = qkv.data();
        const float* k = packed ? q + C : q + rows * width;
        const float* v = packed ? q + 2 * C : q + 2 * rows * width;
        std::vector<float> out(B * T * C), probs(B * NH * T * T), want(B * T * C), want_probs(B * NH * T * T);
        causal_attention_forward(out.data(), probs.data(), q, k, v, ld, dropout, b, T, nh, hd);
        ref::causal_attention_forward(want.data(), want_probs.data(), q, k, v, ld, dropout, b, T, nh, hd);
        const auto where = [&] {
          return ::testing::Message() << "B=" << B << " T=" << T << " NH=" << NH << " hd=" << hd << " p=" << p
                                      << (packed ? " qkv rows" : " separate");
        };
        EXPECT_LT(relative_error(out, want), 1e-5) << where();
        EXPECT_LT(relative_error(probs, want_probs), 1e-5) << where();
        std::vector<float> dqkv(qkv.size(), NAN), want_dqkv(qkv.size());
        float* dq = dqkv.data();
        float* dk = packed ? dq + C : dq + rows * width;
        float* dv = packed ? dq + 2 * C : dq + 2 * rows * width;
        causal_attention_backward(dq, dk, dv, dout.data(), q, k, v, ld, probs.data(), dropout, b, T, nh, hd);
        float* wq = want_dqkv.data();
        float* wk = packed ? wq + C : wq + rows * width;
        float* wv = packed ? wq + 2 * C : wq + 2 * rows * width;
        ref::causal_attention_backward(wq, wk, wv, dout.data(), q, k, v, ld, want_probs.data(), dropout, b, T, nh, hd);
        EXPECT_LT(relative_error(dqkv, want_dqkv), 1e-5) << where();  // every element written: no NaN left
      }
}

// A mask is a function of (seed, stream, index): the same draws on any thread count, and
// about 1 - p of the weights kept, each scaled by 1 / (1 - p).
TEST_P(TrainingAttention, DropoutKeepsAboutOneMinusPOfTheWeights) {
  const std::int64_t B = 2, T = 96, NH = 2, hd = 8, C = NH * hd;
  const DropoutMask dropout{0.25f, 7, 1, 0};
  std::int64_t kept = 0, counted = 0;
  for (std::int64_t i = 0; i < B * NH * T * T; ++i) {
    const float f = dropout.factor(static_cast<std::uint64_t>(i));
    ASSERT_TRUE(f == 0.0f || f == 1.0f / 0.75f) << f;
    kept += f != 0.0f;
    ++counted;
  }
  EXPECT_NEAR(static_cast<double>(kept) / static_cast<double>(counted), 0.75, 0.01);
  const auto qkv = random_values<float>(B * T * 3 * C, 3);
  std::vector<float> a(B * T * C), b(B * T * C), probs(B * NH * T * T);
  causal_attention_forward(a.data(), probs.data(), qkv.data(), qkv.data() + C, qkv.data() + 2 * C, 3 * C, dropout, B,
                           T, NH, hd);
  set_num_threads(1);
  causal_attention_forward(b.data(), probs.data(), qkv.data(), qkv.data() + C, qkv.data() + 2 * C, 3 * C, dropout, B,
                           T, NH, hd);
  EXPECT_EQ(a, b);
}

INSTANTIATE_TEST_SUITE_P(Sets, TrainingAttention, test_util::every_isa_and_threads(), test_util::isa_threads_name);

using HeadCrossEntropy = test_util::OnEveryIsa;

TEST_P(HeadCrossEntropy, MatchesReference) {
  // 600 rows: two chunks of the head, the second ragged; V not a multiple of 16.
  const std::int64_t M = 600, C = 40, V = 517;
  const auto x = random_values<float>(M * C, 1), w = random_values<float>(V * C, 2, 0.5);
  auto targets = random_ids(M, V, 3);
  targets[7] = targets[599] = -1;
  const float dscale = 1.0f / 598;
  std::vector<float> losses(M), dx(M * C), want_losses(M), want_dx(M * C);
  auto dw = random_values<float>(V * C, 4);
  auto want_dw = dw;
  std::vector<float> scratch(head_scratch_floats(M, C, V));
  head_cross_entropy(losses.data(), dx.data(), dw.data(), scratch.data(), x.data(), w.data(), targets.data(), dscale,
                     M, C, V, false);
  ref::head_cross_entropy(want_losses.data(), want_dx.data(), want_dw.data(), x.data(), w.data(), targets.data(),
                          dscale, M, C, V);
  EXPECT_LT(relative_error(losses, want_losses), 1e-5);
  EXPECT_EQ(losses[7], 0.0f);
  EXPECT_LT(relative_error(dx, want_dx), 1e-5);
  EXPECT_LT(relative_error(dw, want_dw), 1e-5);
  // Loss only: the same losses, nothing written to dw.
  std::vector<float> eval_losses(M);
  const auto before = dw;
  head_cross_entropy(eval_losses.data(), nullptr, nullptr, scratch.data(), x.data(), w.data(), targets.data(), 0, M,
                     C, V, false);
  EXPECT_EQ(eval_losses, losses);
  EXPECT_EQ(dw, before);
}

// At bf16 the head converts w^T and each vocabulary block of w once per call, for every chunk:
// 600 rows (two chunks, the second ragged) and V = 4200 (blocks of 2048, 2048 and a ragged 104)
// against the F32 reference, within BF16's rounding (operands off by 2^-9 of themselves, so
// about 1% of the largest value at worst) and not at F32's (the BF16 products really ran).
TEST_P(HeadCrossEntropy, AtBf16IsWithinBf16OfReference) {
  if (!gemm_bf16_available()) GTEST_SKIP() << "no BF16 product on this CPU";
  const std::int64_t M = 600, C = 40, V = 4200;
  const auto x = random_values<float>(M * C, 11), w = random_values<float>(V * C, 12, 0.5);
  auto targets = random_ids(M, V, 13);
  targets[5] = -1;
  const float dscale = 1.0f / 599;
  std::vector<float> losses(M), dx(M * C), dw(V * C), want_losses(M), want_dx(M * C), want_dw(V * C);
  std::vector<float> scratch(head_scratch_floats(M, C, V));
  head_cross_entropy(losses.data(), dx.data(), dw.data(), scratch.data(), x.data(), w.data(), targets.data(), dscale,
                     M, C, V, true);
  ref::head_cross_entropy(want_losses.data(), want_dx.data(), want_dw.data(), x.data(), w.data(), targets.data(),
                          dscale, M, C, V);
  EXPECT_EQ(losses[5], 0.0f);
  for (const auto& [name, got, want] : {std::tuple{"losses", &losses, &want_losses}, std::tuple{"dx", &dx, &want_dx},
                                        std::tuple{"dw", &dw, &want_dw}}) {
    EXPECT_LT(relative_error(*got, *want), 2e-2) << name;
    EXPECT_GT(relative_error(*got, *want), 1e-4) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Sets, HeadCrossEntropy, test_util::every_isa_and_threads(), test_util::isa_threads_name);

// ---- references against finite differences, in double ----

TEST(TrainingKernelReferences, AttentionGradient) {
  for (float p : {0.0f, 0.4f}) {
    const std::int64_t B = 2, T = 5, NH = 2, hd = 3, C = NH * hd;
    const DropoutMask dropout{p, 4, 2};
    auto qkv = random_values<double>(B * T * 3 * C, 1);
    const auto g = random_values<double>(B * T * C, 2);
    std::vector<double> probs(B * NH * T * T);
    const auto loss = [&] {
      std::vector<double> out(B * T * C);
      ref::causal_attention_forward(out.data(), probs.data(), qkv.data(), qkv.data() + C, qkv.data() + 2 * C, 3 * C,
                                    dropout, B, T, NH, hd);
      return weighted_sum(out, g);
    };
    loss();
    std::vector<double> dqkv(B * T * 3 * C);
    ref::causal_attention_backward(dqkv.data(), dqkv.data() + C, dqkv.data() + 2 * C, g.data(), qkv.data(),
                                   qkv.data() + C, qkv.data() + 2 * C, 3 * C, probs.data(), dropout, B, T, NH, hd);
    expect_gradient(qkv, loss, dqkv, p > 0 ? "qkv (dropout)" : "qkv");
  }
}

TEST(TrainingKernelReferences, HeadCrossEntropyGradients) {
  const std::int64_t M = 4, C = 3, V = 6;
  auto x = random_values<double>(M * C, 1), w = random_values<double>(V * C, 2);
  const std::vector<std::int32_t> targets{2, -1, 5, 0};
  const double dscale = 1.0 / 3;  // the mean over the three counted rows
  const auto loss = [&] {
    std::vector<double> losses(M);
    ref::head_cross_entropy<double>(losses.data(), nullptr, nullptr, x.data(), w.data(), targets.data(), 0, M, C, V);
    double s = 0;
    for (double l : losses) s += l;
    return s * dscale;
  };
  std::vector<double> losses(M), dx(M * C), dw(V * C);
  ref::head_cross_entropy(losses.data(), dx.data(), dw.data(), x.data(), w.data(), targets.data(), dscale, M, C, V);
  expect_gradient(x, loss, dx, "x");
  expect_gradient(w, loss, dw, "w");
}

}  // namespace
}  // namespace kael::kernels
