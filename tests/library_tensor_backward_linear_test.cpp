// linear's named backward rule (src/tensor/backward.hpp) alone against central finite
// differences in F64, linear's own node against the matmul-and-add composition it replaces, and
// how autograd hands a leaf its gradient: a gradient no one else holds becomes the .grad without
// a copy, a .grad no one else holds takes the next one in place, and a .grad that someone holds
// is never changed under them (torch's AccumulateGrad); and the other buffers of a training step
// that are no longer fresh mappings or copies: a big embedding's gradient, clip_grad_norm_'s scaling.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>
#include <functional>
#include <string>

#include "kael/nn/layers.hpp"
#include "kael/optim/clip_grad.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "tensor/backward.hpp"
#include "tensor_backward_testing.hpp"

namespace kael {
namespace {

using tensor_detail::linear_backward;

using tensor_backward_testing::expect_close;
using tensor_backward_testing::numeric_gradient;

void expect_equal(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  for (std::int64_t i = 0; i < want.numel(); ++i)
    ASSERT_EQ(got.value_as_double(i), want.value_as_double(i)) << what << " element " << i;
}

TEST(TensorBackwardLinear, MatchesFiniteDifferences) {
  manual_seed(3);
  const Tensor x = randn({2, 3, 5}, DType::F64), w = randn({4, 5}, DType::F64), b = randn({4}, DType::F64);
  const Tensor g = randn({2, 3, 4}, DType::F64);
  const auto grads = linear_backward(g, x, w, true, true, true);
  expect_close(grads[0], numeric_gradient([&](const Tensor& v) { return linear(v, w, b); }, x, g), 1e-7, "dx");
  expect_close(grads[1], numeric_gradient([&](const Tensor& v) { return linear(x, v, b); }, w, g), 1e-7, "dweight");
  expect_close(grads[2], numeric_gradient([&](const Tensor& v) { return linear(x, w, v); }, b, g), 1e-7, "dbias");
  const auto only_weight = linear_backward(g, x, w, false, true, false);
  EXPECT_FALSE(only_weight[0].defined());
  EXPECT_FALSE(only_weight[2].defined());
  expect_close(only_weight[1], grads[1], 0.0, "dweight alone");
  // A 1-D input is one row.
  const Tensor x1 = randn({5}, DType::F64), g1 = randn({4}, DType::F64);
  const auto row = linear_backward(g1, x1, w, true, true, true);
  expect_close(row[0], numeric_gradient([&](const Tensor& v) { return linear(v, w, b); }, x1, g1), 1e-7, "1-D dx");
  expect_close(row[1], numeric_gradient([&](const Tensor& v) { return linear(x1, v, b); }, w, g1), 1e-7, "1-D dweight");
}

// The composition linear ran before it had its own node: the same values forward, and the same
// gradients (the weight's is the same sums, made in its own layout rather than transposed).
TEST(TensorBackwardLinear, OwnNodeMatchesMatmulAndAdd) {
  manual_seed(4);
  const Tensor x0 = randn({3, 7, 40}), w0 = randn({24, 40}), b0 = randn({24}), g = randn({3, 7, 24});
  const auto run = [&](bool fused) {
    Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
    const Tensor y = fused ? linear(x, w, b) : add(matmul(x, w.transpose(0, 1)), b);
    if (fused) {
      EXPECT_EQ(y.autograd_meta()->grad_fn->name, "linear");
    }
    y.backward(g);
    return std::vector<Tensor>{y.detach(), x.grad(), w.grad(), b.grad()};
  };
  const auto fused = run(true), composed = run(false);
  expect_equal(fused[0], composed[0], "y");
  expect_equal(fused[1], composed[1], "dx");
  expect_equal(fused[2], composed[2], "dweight");
  expect_equal(fused[3], composed[3], "dbias");
  EXPECT_TRUE(fused[2].is_contiguous());
}

// A node whose backward returns a fresh gradient of x's shape and tells where its bytes are.
Tensor through_fresh_gradient(const Tensor& x, const void** bytes) {
  return autograd::record("fresh", x.detach().clone(), {&x}, [bytes](const Tensor& g) {
    Tensor fresh = mul(g, 3.0);
    *bytes = fresh.raw_data();
    return std::vector<Tensor>{fresh};
  });
}

TEST(TensorGradientBuffers, LeafKeepsAFreshGradientWithoutACopy) {
  Tensor x = ones({1000}).requires_grad_();
  const void* bytes = nullptr;
  sum(through_fresh_gradient(x, &bytes)).backward();
  EXPECT_EQ(static_cast<const void*>(x.grad().raw_data()), bytes);
  EXPECT_EQ(x.grad().to_vector<float>()[0], 3.0f);
  // The next gradient is added in place: no one holds the first.
  const void* first = bytes;
  sum(through_fresh_gradient(x, &bytes)).backward();
  EXPECT_EQ(static_cast<const void*>(x.grad().raw_data()), first);
  EXPECT_EQ(x.grad().to_vector<float>()[999], 6.0f);
}

TEST(TensorGradientBuffers, AGradientSomeoneHoldsIsNeverChangedOrAliased) {
  Tensor x = ones({4}).requires_grad_();
  Tensor seen;  // the hook keeps the gradient that reaches x: x.grad must not share its bytes
  autograd::register_hook(x, [&seen](const Tensor& g) {
    seen = g;
    return Tensor();
  });
  sum(mul(x, 2.0)).backward();
  EXPECT_NE(static_cast<const void*>(x.grad().raw_data()), static_cast<const void*>(seen.raw_data()));
  const Tensor held = x.grad();
  sum(mul(x, 2.0)).backward();
  EXPECT_EQ(held.to_vector<float>(), std::vector<float>(4, 2.0f));  // the .grad taken before keeps its values
  EXPECT_EQ(x.grad().to_vector<float>(), std::vector<float>(4, 4.0f));
  seen.fill_(100.0);
  EXPECT_EQ(x.grad().to_vector<float>(), std::vector<float>(4, 4.0f));
}

// A table big enough for a reused huge block (over 2 MiB): its gradient is zero but for the
// looked-up rows, each the F32 sum, in order, of the gradients of its lookups, even when the
// block held other values before.
TEST(TensorGradientBuffers, EmbeddingGradientOfABigTable) {
  manual_seed(5);
  const std::int64_t rows = 1024, width = 600;
  { const Tensor dirty = full({rows, width}, 7.0); }  // freed: its block may come back to the gradient
  Tensor table = randn({rows, width}).requires_grad_();
  const std::vector<std::int64_t> ids = {5, 900, 5, 0, 5};
  const Tensor g = randn({5, width});
  embedding(from_vector<std::int64_t>(ids, {5}), table).backward(g);
  const Tensor grad = table.grad();
  const std::vector<float> got = grad.to_vector<float>(), gv = g.to_vector<float>();
  std::vector<float> want(static_cast<std::size_t>(rows * width), 0.0f);
  for (std::size_t i = 0; i < ids.size(); ++i)
    for (std::int64_t c = 0; c < width; ++c)
      want[static_cast<std::size_t>(ids[i] * width + c)] += gv[i * static_cast<std::size_t>(width) + static_cast<std::size_t>(c)];
  EXPECT_EQ(got, want);
}

// clip_grad_norm_ scales the gradients in place (a handle taken before sees it), each value the
// F32 product by the coefficient, as mul_.
TEST(TensorGradientBuffers, ClipGradNormScalesInPlace) {
  manual_seed(6);
  Tensor p = randn({3000}).requires_grad_();
  const Tensor g = mul(randn({3000}), 10.0);
  p.set_grad(g.clone());
  const Tensor held = p.grad();
  const double total = optim::clip_grad_norm_({p}, 1.0);
  const Tensor want = mul(g, std::min(1.0 / (total + 1e-6), 1.0));
  EXPECT_EQ(held.to_vector<float>(), want.to_vector<float>());
}

// Module::zero_grad as torch's: by default the gradients are dropped (undefined); with
// set_to_none false they stay, zeroed in place (a handle taken before sees the zeros), and the
// next backward adds into them.
TEST(TensorGradientBuffers, ModuleZeroGrad) {
  manual_seed(7);
  nn::Linear layer(3, 2);
  const Tensor x = randn({4, 3});
  sum(layer.forward(x)).backward();
  const Tensor held = layer.weight.grad();
  const std::vector<float> first = held.to_vector<float>();
  layer.zero_grad(false);
  EXPECT_EQ(held.to_vector<float>(), std::vector<float>(6, 0.0f));
  sum(layer.forward(x)).backward();
  EXPECT_EQ(layer.weight.grad().to_vector<float>(), first);
  layer.zero_grad();
  EXPECT_FALSE(layer.weight.grad().defined());
  EXPECT_FALSE(layer.bias.grad().defined());
}

}  // namespace
}  // namespace kael
