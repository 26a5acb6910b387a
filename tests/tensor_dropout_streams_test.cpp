// DropoutStreams: inside a scope each dropout takes the next stream and numbers its elements by
// the rows of a larger batch, so a batch split over processes draws the whole batch's masks, in
// kael::dropout and in scaled_dot_product_attention's dropout (forward and gradients); outside a
// scope the process generator is used as before. Post-accumulate gradient hooks run once per
// contribution to a leaf, after it is added.
#include <gtest/gtest.h>

#include <vector>

#include "kael/core/error.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/dropout_streams.hpp"
#include "kael/tensor/ops.hpp"

namespace kael {
namespace {

std::vector<float> values(const Tensor& t) {
  const Tensor d = t.detach().contiguous();
  return {d.data<float>(), d.data<float>() + d.numel()};
}

TEST(DropoutStreams, RowsSplitOverProcessesDrawTheWholeBatchsMasks) {
  const Tensor x = randn({4, 3, 5});
  Tensor whole, top, bottom;
  {
    DropoutStreams streams(11, 7, 0);
    whole = dropout(x, 0.4);
    EXPECT_EQ(streams.next_stream(), 8u);
  }
  {
    DropoutStreams streams(11, 7, 0);
    top = dropout(x.narrow(0, 0, 2).contiguous(), 0.4);
  }
  {
    DropoutStreams streams(11, 7, 2);
    bottom = dropout(x.narrow(0, 2, 2).contiguous(), 0.4);
  }
  EXPECT_EQ(values(whole), values(cat({top, bottom}, 0)));
  const auto w = values(whole);
  EXPECT_TRUE(std::count(w.begin(), w.end(), 0.0f) > 0 && std::count(w.begin(), w.end(), 0.0f) < 60);
}

TEST(DropoutStreams, EachDropoutTakesTheNextStreamAndTheGeneratorIsLeftAlone) {
  const Tensor x = ones({64});
  manual_seed(5);
  const Tensor outside = dropout(x, 0.5);
  manual_seed(5);
  Tensor first, second, again;
  {
    DropoutStreams streams(3, 0);
    first = dropout(x, 0.5);
    second = dropout(x, 0.5);
  }
  EXPECT_EQ(values(dropout(x, 0.5)), values(outside));  // the scope drew nothing from the generator
  {
    DropoutStreams streams(3, 1);
    again = dropout(x, 0.5);
  }
  EXPECT_NE(values(first), values(second));
  EXPECT_EQ(values(second), values(again));
  EXPECT_THROW(DropoutStreams(3, 0, -1), ValueError);
}

TEST(DropoutStreams, AttentionDropoutSplitsByRowsInTheForwardAndTheGradients) {
  const Tensor q = randn({4, 2, 6, 8}), k = randn({4, 2, 6, 8}), v = randn({4, 2, 6, 8}), g = randn({4, 2, 6, 8});
  const auto run = [&](std::int64_t first, std::int64_t rows) {
    Tensor qs = q.narrow(0, first, rows).contiguous().requires_grad_(), ks = k.narrow(0, first, rows).contiguous(),
           vs = v.narrow(0, first, rows).contiguous().requires_grad_();
    Tensor out;
    {
      DropoutStreams streams(9, 4, first);
      out = scaled_dot_product_attention(qs, ks, vs, true, Tensor(), std::nullopt, 0.3);
    }
    out.backward(g.narrow(0, first, rows).contiguous());
    return std::vector<Tensor>{out.detach(), qs.grad(), vs.grad()};
  };
  const auto whole = run(0, 4), top = run(0, 1), bottom = run(1, 3);
  for (std::size_t i = 0; i < whole.size(); ++i) {
    const auto split = values(cat({top[i], bottom[i]}, 0)), all = values(whole[i]);
    ASSERT_EQ(split.size(), all.size());
    for (std::size_t j = 0; j < all.size(); ++j) EXPECT_NEAR(split[j], all[j], 1e-6f) << i << " " << j;
  }
  // Dropout did drop: without it the output differs.
  const Tensor plain = scaled_dot_product_attention(q, k, v, true);
  EXPECT_NE(values(plain), values(whole[0]));
}

TEST(PostAccumulateHooks, RunAfterEachContributionWithTheAccumulatedGradient) {
  Tensor w = ones({3}).requires_grad_();
  std::vector<std::vector<float>> seen;
  autograd::register_post_accumulate_grad_hook(w, [&](const Tensor& grad) { seen.push_back(values(grad)); });
  const Tensor loss = sum(add(mul(w, 2.0), mul(w, 3.0)));  // w used twice: two contributions
  loss.backward();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE((seen[0] == std::vector<float>{2, 2, 2}) || (seen[0] == std::vector<float>{3, 3, 3}));
  EXPECT_EQ(seen[1], (std::vector<float>{5, 5, 5}));
  EXPECT_THROW(autograd::register_post_accumulate_grad_hook(mul(w, 2.0), [](const Tensor&) {}), ValueError);
  EXPECT_THROW(autograd::register_post_accumulate_grad_hook(ones({2}), [](const Tensor&) {}), ValueError);
}

}  // namespace
}  // namespace kael
