// GptNet's step, the forward and backward `kael train` runs (nn::GPT with autograd), on a tiny
// config with both heads: every parameter's gradient against central differences of the loss,
// micro-batches accumulating to the whole batch's gradient, dropout drawn per stream and
// redrawn equal, rows split over processes giving the whole batch's loss and gradients, results
// independent of the thread count, evaluate without dropout or gradients, and bad calls.
// (Before this step replaced the hand-written one, it matched it within 1e-5: issue 55.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kael/core/error.hpp"
#include "kael/model/gpt2.hpp"
#include "train/net/gpt_net.hpp"
#include "train_testing.hpp"

namespace kael::train {
namespace {

model::Config tiny_config(bool tied) { return train_testing::gpt2_config(2, 3, 24, 53, tied); }

std::vector<std::int32_t> random_ids(int n, int vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n));
  for (auto& id : ids) id = static_cast<std::int32_t>(rng() % static_cast<unsigned>(vocab));
  return ids;
}

// A net whose weights are larger than GPT-2's init, so every path carries gradient.
GptNet lively_net(bool tied, double dropout = 0.0) {
  GptNet net = GptNet::init(tiny_config(tied), 7, dropout);
  std::mt19937 rng(3);
  std::normal_distribution<float> noise(0.0f, 0.3f);
  for (NetParameter& p : net.parameters()) {
    float* data = p.tensor.data<float>();
    for (std::int64_t i = 0; i < p.tensor.numel(); ++i) data[i] += noise(rng);
    p.tensor.bump_version();
  }
  return net;
}

// Every parameter's gradient, concatenated in order (nn::GPT's layout).
std::vector<float> all_grads(GptNet& net) {
  std::vector<float> out;
  for (const NetParameter& p : net.parameters()) {
    const Tensor g = p.tensor.grad().contiguous();
    out.insert(out.end(), g.data<float>(), g.data<float>() + g.numel());
  }
  return out;
}

void zero_grads(GptNet& net) {
  for (NetParameter& p : net.parameters()) p.tensor.set_grad(Tensor());
}

// max |a - b| over the largest |b|, checked against 1e-5.
void expect_close(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  float scale = 0, error = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::abs(b[i]));
    error = std::max(error, std::abs(a[i] - b[i]));
  }
  EXPECT_LE(error, 1e-5f * scale) << what;
}

class TrainNet : public ::testing::TestWithParam<bool> {};

TEST_P(TrainNet, GradientsMatchCentralDifferencesOfTheLoss) {
  GptNet net = lively_net(GetParam());
  const int B = 2, T = 9;
  const auto inputs = random_ids(B * T, 53, 5), targets = random_ids(B * T, 53, 6);
  net.forward_backward(inputs, targets, B, T, 1.0f, {});
  std::mt19937 rng(11);
  for (NetParameter& p : net.parameters()) {
    float* data = p.tensor.data<float>();
    const Tensor grad = p.tensor.grad().contiguous();
    for (int trial = 0; trial < 3; ++trial) {
      // wpe rows past T and wte rows of unseen tokens have no gradient; probe used ones.
      std::int64_t i = static_cast<std::int64_t>(rng() % static_cast<unsigned>(p.tensor.numel()));
      if (p.name == "transformer.wpe.weight") i %= T * 24;
      const float saved = data[i], h = 1e-2f;
      // Each write bumps the version, so no packed copy of the old weight is used (nn's inference).
      const auto set = [&](float value) {
        data[i] = value;
        p.tensor.bump_version();
      };
      set(saved + h);
      const double up = net.evaluate(inputs, targets, B, T);
      set(saved - h);
      const double down = net.evaluate(inputs, targets, B, T);
      set(saved);
      const double numeric = (up - down) / (2.0 * h);
      EXPECT_NEAR(grad.data<float>()[i], numeric, 2e-3 + 0.03 * std::abs(numeric)) << p.name << "[" << i << "]";
    }
  }
}

TEST_P(TrainNet, AccumulatedMicroBatchesEqualOneBatch) {
  GptNet net = lively_net(GetParam());
  const int T = 11;
  const auto inputs = random_ids(2 * T, 53, 9), targets = random_ids(2 * T, 53, 10);
  const float loss = net.forward_backward(inputs, targets, 2, T, 1.0f, {});
  const std::vector<float> whole = all_grads(net);
  zero_grads(net);
  const auto row = [&](const std::vector<std::int32_t>& ids, int r) {
    return std::vector<std::int32_t>(ids.begin() + r * T, ids.begin() + (r + 1) * T);
  };
  const float first = net.forward_backward(row(inputs, 0), row(targets, 0), 1, T, 0.5f, {});
  const float second = net.forward_backward(row(inputs, 1), row(targets, 1), 1, T, 0.5f, {});
  EXPECT_NEAR((first + second) / 2, loss, 1e-6);
  const std::vector<float> accumulated = all_grads(net);
  for (std::size_t i = 0; i < whole.size(); ++i) ASSERT_NEAR(accumulated[i], whole[i], 1e-6) << i;
}

TEST_P(TrainNet, DropoutIsDrawnPerStreamAndRedrawnEqual) {
  GptNet net = lively_net(GetParam(), 0.3);
  const int B = 2, T = 13;
  const auto inputs = random_ids(B * T, 53, 4), targets = random_ids(B * T, 53, 5);
  const float clean = net.evaluate(inputs, targets, B, T);
  const auto step = [&](std::uint64_t first_stream) {
    zero_grads(net);
    const float loss = net.forward_backward(inputs, targets, B, T, 1.0f, {9, first_stream, 0});
    return std::pair(loss, all_grads(net));
  };
  const auto [a, a_grads] = step(5 << 16);
  const auto [next, next_grads] = step(6 << 16);
  EXPECT_NE(a, clean);
  EXPECT_NE(a, next) << "other streams draw other masks";
  const auto [again, again_grads] = step(5 << 16);
  EXPECT_EQ(again, a) << "the same streams draw the same masks";
  EXPECT_EQ(again_grads, a_grads);
  EXPECT_EQ(net.evaluate(inputs, targets, B, T), clean) << "evaluate never drops";
}

TEST_P(TrainNet, RowsSplitOverProcessesGiveTheWholeBatchsLoss) {
  const model::Config config = tiny_config(GetParam());
  const int B = 4, T = 9;
  const auto inputs = random_ids(B * T, config.vocab_size, 3), targets = random_ids(B * T, config.vocab_size, 4);
  GptNet whole = GptNet::init(config, 5, 0.3), split = GptNet::init(config, 5, 0.3);
  const float all = whole.forward_backward(inputs, targets, B, T, 1.0f, {8, 1 << 16, 0});
  const auto half = [](const std::vector<std::int32_t>& ids, int first, int T) {
    return std::vector<std::int32_t>(ids.begin() + first * T, ids.begin() + (first + 2) * T);
  };
  const float top = split.forward_backward(half(inputs, 0, T), half(targets, 0, T), 2, T, 0.5f, {8, 1 << 16, 0});
  const float bottom = split.forward_backward(half(inputs, 2, T), half(targets, 2, T), 2, T, 0.5f, {8, 1 << 16, 2});
  EXPECT_NEAR((top + bottom) / 2, all, 1e-5f * all);
  expect_close(all_grads(split), all_grads(whole), "gradients");
  // Without the row offset the bottom half would draw rows 0-1's masks: another loss.
  GptNet same_rows = GptNet::init(config, 5, 0.3);
  const float wrong = same_rows.forward_backward(half(inputs, 2, T), half(targets, 2, T), 2, T, 0.5f, {8, 1 << 16, 0});
  EXPECT_GT(std::abs(wrong - bottom), 1e-4f);
}

TEST_P(TrainNet, ResultsDoNotDependOnTheThreadCount) {
  const int B = 3, T = 17;
  const auto inputs = random_ids(B * T, 53, 2), targets = random_ids(B * T, 53, 3);
  std::vector<float> grads[2];
  float losses[2];
  for (const int threads : {1, 2}) {
    model::set_num_threads(threads);
    GptNet net = lively_net(GetParam(), 0.2);
    losses[threads - 1] = net.forward_backward(inputs, targets, B, T, 1.0f, {4, 0, 0});
    grads[threads - 1] = all_grads(net);
  }
  model::set_num_threads(0);
  EXPECT_EQ(losses[0], losses[1]);
  EXPECT_EQ(grads[0], grads[1]);
}

TEST_P(TrainNet, EvaluateLeavesGradientsAlone) {
  GptNet net = lively_net(GetParam());
  const auto inputs = random_ids(14, 53, 6), targets = random_ids(14, 53, 7);
  net.forward_backward(inputs, targets, 2, 7, 1.0f, {});
  const std::vector<float> before = all_grads(net);
  net.evaluate(inputs, targets, 2, 7);
  EXPECT_EQ(all_grads(net), before);
}

INSTANTIATE_TEST_SUITE_P(Heads, TrainNet, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "tied" : "untied"; });

TEST(TrainNetCalls, BadCallsThrow) {
  GptNet net = lively_net(true);
  auto inputs = random_ids(41, 53, 1), targets = random_ids(41, 53, 2);
  EXPECT_THROW(net.forward_backward(inputs, targets, 1, 41, 1.0f, {}), ValueError);  // > n_positions
  inputs.resize(8);
  targets.resize(8);
  inputs[3] = 53;
  EXPECT_THROW(net.forward_backward(inputs, targets, 1, 8, 1.0f, {}), IndexError);
  inputs[3] = 0;
  EXPECT_THROW(net.forward_backward(inputs, targets, 2, 8, 1.0f, {}), ValueError);  // 8 ids for 2 x 8
  EXPECT_THROW(net.evaluate(inputs, targets, 1, 9), ValueError);
}

}  // namespace
}  // namespace kael::train
