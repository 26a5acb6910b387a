// nn's inference path: in eval mode with nothing recording a gradient, Linear and GPT's tied head
// multiply through a packed copy of the weight (src/nn/packed_weight.hpp), and a decode step of
// the KV cache runs on the kernels. The results must be the tensor library's bit for bit, and
// the copy must follow every change of the weight.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "kael/nn/generate.hpp"
#include "kael/nn/gpt.hpp"
#include "kael/nn/layers.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"

namespace kael::nn {
namespace {

std::vector<float> values(const Tensor& t) { return t.to(DType::F32).contiguous().to_vector<float>(); }

void expect_same(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_EQ(values(got), values(want));
}

// Within float rounding: a stale packed copy would be off by far more.
void expect_close(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.shape(), want.shape());
  const std::vector<float> a = values(got), b = values(want);
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5f * (1.0f + std::fabs(b[i]))) << i;
}

TEST(LinearInference, EqualsTheTensorLibrarysLinearBitForBit) {
  manual_seed(5);
  // Widths around the kernels' 16-column panels, with and without a bias, one row and several.
  for (const auto& [in, out] : {std::pair{8, 37}, {33, 16}, {64, 130}, {1, 1}})
    for (const bool with_bias : {true, false})
      for (const Shape& rows : {Shape{1, 1}, Shape{5}, Shape{2, 3}}) {
        Linear layer(in, out, with_bias);
        layer.eval();
        Shape shape = rows;
        shape.push_back(in);
        const Tensor x = randn(shape);
        const autograd::NoGradGuard guard;
        SCOPED_TRACE(str(in, " -> ", out, with_bias ? " with bias, x " : ", x ", shape_to_string(shape)));
        expect_same(layer.forward(x), linear(x, layer.weight, layer.bias));
        expect_same(layer.forward(x), linear(x, layer.weight, layer.bias));  // the kept copy
      }
}

TEST(LinearInference, ThePackedCopyFollowsTheWeight) {
  manual_seed(6);
  Linear layer(24, 40);
  layer.eval();
  const autograd::NoGradGuard guard;
  const Tensor x = randn({1, 24});
  expect_same(layer.forward(x), linear(x, layer.weight, layer.bias));
  layer.weight.mul_(2.0);  // in place: the version moves
  expect_same(layer.forward(x), linear(x, layer.weight, layer.bias));
  layer.weight.narrow(0, 3, 1).fill_(0.5);  // through a view of the same bytes
  expect_same(layer.forward(x), linear(x, layer.weight, layer.bias));
  layer.weight = randn({40, 24});  // another tensor
  expect_same(layer.forward(x), linear(x, layer.weight, layer.bias));
  layer.bias.add_(ones({40}));  // the bias is read as it is at each call
  expect_same(layer.forward(x), linear(x, layer.weight, layer.bias));
  layer.load_state_dict({{"weight", randn({40, 24})}, {"bias", randn({40})}});
  expect_same(layer.forward(x), linear(x, layer.weight, layer.bias));
}

TEST(LinearInference, AGradientOrTrainingModeTakesTheRecordedPath) {
  manual_seed(7);
  Linear layer(12, 20);
  layer.eval();
  const Tensor x = randn({1, 12});
  const Tensor y = layer.forward(x);  // grad mode on and the parameters require grad
  ASSERT_TRUE(y.requires_grad());
  y.sum().backward();
  ASSERT_TRUE(layer.weight.grad().defined());
  expect_same(layer.weight.grad(), x.expand({20, 12}));
  layer.train();
  const autograd::NoGradGuard guard;
  expect_same(layer.forward(x), linear(x, layer.weight, layer.bias));
}

TEST(LinearInference, ThreadsSharingALayerGetTheSameResult) {
  // The first inference forwards race to make the packed copy: one makes it, all read it.
  manual_seed(10);
  Linear layer(96, 200);
  layer.eval();
  const Tensor x = randn({1, 96});
  Tensor want;
  {
    const autograd::NoGradGuard guard;
    want = linear(x, layer.weight, layer.bias);
  }
  std::vector<Tensor> got(4);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < got.size(); ++i)
    threads.emplace_back([&, i] {
      const autograd::NoGradGuard guard;  // grad mode is per thread
      got[i] = layer.forward(x);
    });
  for (std::thread& t : threads) t.join();
  for (const Tensor& y : got) expect_same(y, want);
}

GptConfig small_config() {
  // Sizes off the kernels' 16-wide panels: vocabulary 101, three heads of 16.
  return GptConfig{.vocab_size = 101, .n_positions = 40, .n_layer = 2, .n_head = 3, .n_embd = 48};
}

// Attention differs in the last bits: with a gradient it runs the training kernel, which keeps
// the probabilities for the backward and sums in another order than the decode kernel.
TEST(GptInference, LogitsAreTheRecordedForwards) {
  manual_seed(8);
  for (const bool tied : {true, false}) {
    GptConfig config = small_config();
    config.tied_embeddings = tied;
    GPT model(config);
    model.eval();
    const Tensor ids = randint(0, 101, {2, 7});
    SCOPED_TRACE(tied ? "tied head" : "lm_head");
    // The parameters require grad: recorded, the tensor library's ops; under the guard, inference's.
    const auto both = [&] {
      const Tensor recorded = model.forward(ids);
      EXPECT_TRUE(recorded.requires_grad());
      const autograd::NoGradGuard guard;
      expect_close(model.forward(ids), recorded.detach());
    };
    both();
    {  // the head's copy follows the embedding it is tied to
      const autograd::NoGradGuard guard;
      model.token_embedding->weight.mul_(1.5);
    }
    both();
  }
}

}  // namespace
}  // namespace kael::nn
