// GptNet, the model `kael train` runs (nn::GPT with autograd under GPT-2's checkpoint names),
// against the hand-written TrainableGPT2 it replaced: the same seeded initial weights, the same
// names and stored shapes, and for one micro-batch the same loss and gradients within 1e-5 of the
// largest, with dropout too (the dropout streams reproduce its masks, rows split over processes
// included); the layout copies round-trip.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <tuple>
#include <vector>

#include "kael/train/gpt2_train.hpp"
#include "train/net/gpt_net.hpp"

namespace kael::train {
namespace {

model::Config tiny_config(bool tied) {
  model::Config c;
  c.n_layer = 2;
  c.n_head = 3;
  c.n_embd = 24;
  c.n_positions = 40;
  c.vocab_size = 53;
  c.tie_word_embeddings = tied;
  return c;
}

std::vector<std::int32_t> random_ids(int n, int vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n));
  for (auto& id : ids) id = static_cast<std::int32_t>(rng() % static_cast<unsigned>(vocab));
  return ids;
}

// The net's value or gradient of parameter p in the stored (Hugging Face) layout.
std::vector<float> stored(const NetParameter& p, const Tensor& t) {
  const Tensor s = GptNet::stored(p, t).contiguous();
  EXPECT_EQ(s.shape(), p.shape) << p.name;
  return std::vector<float>(s.data<float>(), s.data<float>() + s.numel());
}

// max |a - b| / max |b|, checked against 1e-5.
float expect_close(const std::vector<float>& a, const float* b, const std::string& name) {
  float scale = 0, error = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::abs(b[i]));
    error = std::max(error, std::abs(a[i] - b[i]));
  }
  EXPECT_LE(error, 1e-5f * scale) << name;
  return scale > 0 ? error / scale : error;
}

class TrainNet : public ::testing::TestWithParam<bool> {};

// (tied head, dropout probability)
class TrainNetAgainstHand : public ::testing::TestWithParam<std::tuple<bool, float>> {};

// Prints the figures of the closing note of issue 55: the largest |loss difference| relative to
// the loss over the two calls, and for each parameter max |grad difference| / max |grad|.
TEST_P(TrainNetAgainstHand, MatchesTheHandWrittenStep) {
  const auto [tied, p] = GetParam();
  const model::Config config = tiny_config(tied);
  const std::uint64_t seed = 17;
  GptNet net = GptNet::init(config, seed, p);
  TrainableGPT2 hand = TrainableGPT2::init(config, seed);
  hand.set_dropout({p, seed});
  const auto hand_parameters = hand.parameters();
  ASSERT_EQ(net.parameters().size(), hand_parameters.size());
  for (std::size_t i = 0; i < hand_parameters.size(); ++i) {
    const NetParameter& ours = net.parameters()[i];
    ASSERT_EQ(ours.name, hand_parameters[i].name);
    ASSERT_EQ(ours.shape, hand_parameters[i].shape);
    EXPECT_EQ(ours.weight_decay, hand_parameters[i].weight_decay);
    const std::vector<float> value = stored(ours, ours.tensor);
    EXPECT_TRUE(std::equal(value.begin(), value.end(), hand_parameters[i].data)) << ours.name;
  }
  // Two calls, so the second's streams follow the first's (the hand-written counter is 1 then).
  const int B = 3, T = 11;
  float loss_gap = 0;
  for (std::uint64_t call = 0; call < 2; ++call) {
    const auto inputs = random_ids(B * T, config.vocab_size, 1 + static_cast<unsigned>(call));
    const auto targets = random_ids(B * T, config.vocab_size, 9 + static_cast<unsigned>(call));
    const float hand_loss = hand.forward_backward(inputs.data(), targets.data(), B, T, 0.5f);
    const float net_loss = net.forward_backward(inputs, targets, B, T, 0.5f, {seed, call << 16, 0});
    EXPECT_NEAR(net_loss, hand_loss, 1e-5f * hand_loss);
    loss_gap = std::max(loss_gap, std::abs(net_loss - hand_loss) / hand_loss);
  }
  std::printf("%s head, dropout %.1f: max |loss difference| / loss = %.3g\n", tied ? "tied" : "untied",
              static_cast<double>(p), static_cast<double>(loss_gap));
  float worst = 0;
  for (std::size_t i = 0; i < hand_parameters.size(); ++i) {
    const NetParameter& ours = net.parameters()[i];
    const float gap = expect_close(stored(ours, ours.tensor.grad()), hand_parameters[i].grad, ours.name);
    worst = std::max(worst, gap);
    std::printf("  %-36s max |grad difference| / max |grad| = %.3g\n", ours.name.c_str(), static_cast<double>(gap));
  }
  std::printf("  largest over the parameters: %.3g\n", static_cast<double>(worst));
}

INSTANTIATE_TEST_SUITE_P(HeadsAndDropout, TrainNetAgainstHand,
                         ::testing::Combine(::testing::Values(true, false), ::testing::Values(0.0f, 0.2f)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "tied" : "untied") +
                                  (std::get<1>(info.param) > 0 ? "_dropout" : "_no_dropout");
                         });

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
  for (std::size_t i = 0; i < whole.parameters().size(); ++i) {
    const NetParameter& a = whole.parameters()[i];
    const NetParameter& b = split.parameters()[i];
    expect_close(stored(b, b.tensor.grad()), stored(a, a.tensor.grad()).data(), a.name);
  }
}

INSTANTIATE_TEST_SUITE_P(Heads, TrainNet, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "tied" : "untied"; });

TEST(TrainNetLayout, CopiesRoundTripAndTransposeTheConv1DWeights) {
  GptNet net = GptNet::init(tiny_config(true), 2, 0.0);
  for (const NetParameter& p : net.parameters()) {
    const std::vector<float> hf = stored(p, p.tensor);
    std::vector<float> back(hf.size());
    GptNet::copy_in(p, hf.data(), back.data());
    const float* data = p.tensor.data<float>();
    EXPECT_TRUE(std::equal(back.begin(), back.end(), data)) << p.name;
    EXPECT_EQ(p.transposed, p.name.find("c_attn.weight") != std::string::npos ||
                                p.name.find("c_proj.weight") != std::string::npos ||
                                p.name.find("c_fc.weight") != std::string::npos)
        << p.name;
    if (p.transposed) {
      EXPECT_EQ(p.tensor.shape(), (Shape{p.shape[1], p.shape[0]})) << p.name;
    }
  }
  model::Config wide = tiny_config(true);
  wide.n_inner = 40;
  EXPECT_THROW(GptNet::init(wide, 1, 0.0), ValueError);
}

}  // namespace
}  // namespace kael::train
