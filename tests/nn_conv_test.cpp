// kael::nn's convolution, pooling and normalization layers through the C++ API: conv2d against a
// direct loop in double on ragged shapes (stride, padding, dilation, groups), its gradients
// against finite differences, pooling's backward, and the layers' parameters and modes. The
// comparison with torch is tests/python/test_nn_conv_vs_torch.py.
#include <gtest/gtest.h>

#include <cmath>

#include "kael/core/error.hpp"
#include "kael/nn/conv.hpp"
#include "kael/nn/layers.hpp"
#include "kael/nn/normalization.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/conv.hpp"
#include "kael/tensor/ops.hpp"
#include "kael/tensor/pool.hpp"

namespace kael::nn {
namespace {

struct ConvCase {
  Shape x, w;
  Size2 stride, padding, dilation;
  std::int64_t groups;
};

// out[n, o, y, x] = b[o] + sum over the group's channels and the kernel, in double.
std::vector<double> direct_conv(const Tensor& x, const Tensor& w, const Tensor& b, const ConvCase& c, Shape& out_shape) {
  const auto N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  const auto O = w.shape()[0], Cg = w.shape()[1], kh = w.shape()[2], kw = w.shape()[3];
  const auto Ho = (H + 2 * c.padding[0] - c.dilation[0] * (kh - 1) - 1) / c.stride[0] + 1;
  const auto Wo = (W + 2 * c.padding[1] - c.dilation[1] * (kw - 1) - 1) / c.stride[1] + 1;
  out_shape = {N, O, Ho, Wo};
  const auto xv = x.contiguous().to_vector<float>(), wv = w.contiguous().to_vector<float>(), bv = b.to_vector<float>();
  std::vector<double> out;
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t o = 0; o < O; ++o)
      for (std::int64_t oy = 0; oy < Ho; ++oy)
        for (std::int64_t ox = 0; ox < Wo; ++ox) {
          double acc = bv[static_cast<std::size_t>(o)];
          const std::int64_t g = o / (O / c.groups);
          for (std::int64_t ci = 0; ci < Cg; ++ci)
            for (std::int64_t i = 0; i < kh; ++i)
              for (std::int64_t j = 0; j < kw; ++j) {
                const std::int64_t iy = oy * c.stride[0] - c.padding[0] + i * c.dilation[0];
                const std::int64_t ix = ox * c.stride[1] - c.padding[1] + j * c.dilation[1];
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                acc += static_cast<double>(xv[static_cast<std::size_t>(((n * C + g * Cg + ci) * H + iy) * W + ix)]) *
                       wv[static_cast<std::size_t>(((o * Cg + ci) * kh + i) * kw + j)];
              }
          out.push_back(acc);
        }
  (void)C;
  return out;
}

TEST(Conv, Conv2dMatchesADirectLoopOnRaggedShapes) {
  const std::vector<ConvCase> cases = {
      {{2, 3, 7, 9}, {5, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1},
      {{1, 4, 11, 6}, {6, 2, 3, 2}, {2, 1}, {1, 2}, {1, 1}, 2},
      {{3, 6, 9, 10}, {4, 3, 2, 3}, {2, 2}, {1, 1}, {2, 1}, 2},
      {{2, 6, 5, 7}, {6, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 6},
      {{3, 8, 6, 5}, {12, 2, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 4},
  };
  manual_seed(1);
  for (const ConvCase& c : cases) {
    const Tensor x = randn(c.x), w = randn(c.w), b = randn({c.w[0]});
    Shape want_shape;
    const std::vector<double> want = direct_conv(x, w, b, c, want_shape);
    const Tensor got = conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
    ASSERT_EQ(got.shape(), want_shape);
    const auto values = got.to_vector<float>();
    for (std::size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(values[i], want[i], 1e-4 * (1 + std::abs(want[i])));
  }
}

TEST(Conv, Conv2dGradientsMatchFiniteDifferences) {
  manual_seed(2);
  const ConvCase c{{2, 4, 6, 5}, {4, 2, 3, 2}, {2, 1}, {1, 1}, {1, 2}, 2};
  const Tensor x0 = randn(c.x, DType::F32), w0 = randn(c.w), b0 = randn({4});
  Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
  const Tensor weights = randn(conv2d(x0, w0, b0, c.stride, c.padding, c.dilation, c.groups).shape());
  sum(mul(conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups), weights)).backward();
  // d loss / d t[i] by central differences in double through the direct loop.
  const auto loss = [&](const Tensor& xs, const Tensor& ws, const Tensor& bs) {
    Shape shape;
    const auto out = direct_conv(xs, ws, bs, c, shape);
    const auto wv = weights.to_vector<float>();
    double total = 0;
    for (std::size_t i = 0; i < out.size(); ++i) total += out[i] * wv[i];
    return total;
  };
  const auto check = [&](const Tensor& grad, int which) {
    const auto g = grad.to_vector<float>();
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(g.size()); i += 3) {
      Tensor xs = x0.clone(), ws = w0.clone(), bs = b0.clone();
      Tensor& t = which == 0 ? xs : which == 1 ? ws : bs;
      const float h = 1e-2f;
      float* p = t.data<float>() + i;
      const float v = *p;
      *p = v + h;
      const double up = loss(xs, ws, bs);
      *p = v - h;
      const double down = loss(xs, ws, bs);
      EXPECT_NEAR(g[static_cast<std::size_t>(i)], (up - down) / (2 * h), 2e-3) << which << " " << i;
    }
  };
  check(x.grad(), 0);
  check(w.grad(), 1);
  check(b.grad(), 2);
}

TEST(Conv, Conv1dIsConv2dOverAHeightOfOne) {
  manual_seed(3);
  const Tensor x = randn({2, 4, 13}), w = randn({6, 2, 3}), b = randn({6});
  const Tensor got = conv1d(x, w, b, 2, 1, 2, 2);
  const Tensor want = conv2d(x.unsqueeze(2), w.unsqueeze(2), b, {1, 2}, {0, 1}, {1, 2}, 2).squeeze(2);
  EXPECT_TRUE(allclose(got, want));
  EXPECT_EQ(got.shape(), (Shape{2, 6, 6}));
}

TEST(Conv, BadArgumentsAreValueErrors) {
  EXPECT_THROW(conv2d(zeros({1, 4, 5, 5}), zeros({2, 3, 3, 3})), ValueError);
  EXPECT_THROW(conv2d(zeros({1, 4, 5, 5}), zeros({2, 4, 7, 3})), ValueError);
  EXPECT_THROW(conv2d(zeros({1, 4, 5, 5}), zeros({2, 4, 3, 3}), Tensor(), {0, 1}), ValueError);
  EXPECT_THROW(conv2d(zeros({1, 4, 5, 5}, DType::F64), zeros({2, 4, 3, 3}, DType::F64)), TypeError);
  EXPECT_THROW(Conv2d(4, 6, {3, 3}, {1, 1}, {0, 0}, {1, 1}, 4), ValueError);
  EXPECT_THROW(max_pool2d(zeros({1, 1, 4, 4}), {2, 2}, {0, 0}, {2, 2}), ValueError);
}

TEST(Conv, WindowArgumentsFarOutsideAnyInputAreRefusedNotWrapped) {
  // 2 * 2**62 wraps around in int64: the output size would be computed from a wrapped value.
  const std::int64_t huge = std::int64_t{1} << 62;
  EXPECT_THROW(conv2d(zeros({1, 1, 5, 5}), zeros({1, 1, 3, 3}), Tensor(), {1, 1}, {huge, 0}), ValueError);
  EXPECT_THROW(conv2d(zeros({1, 1, 5, 5}), zeros({1, 1, 3, 3}), Tensor(), {1, 1}, {0, 0}, {1, huge}), ValueError);
  EXPECT_THROW(conv2d(zeros({1, 1, 5, 5}), zeros({1, 1, 3, 3}), Tensor(), {huge, 1}), ValueError);
  EXPECT_THROW(max_pool2d(zeros({1, 1, 4, 4}), {2, 2}, {2, 2}, {0, 0}, {huge, 1}), ValueError);
  EXPECT_THROW(avg_pool2d(zeros({1, 1, 4, 4}), {2, 2}, {huge, 2}), ValueError);
}

TEST(Pool, MaxPoolSendsTheGradientToTheLargest) {
  const Tensor x = from_vector(std::vector<float>{1, 5, 2, 0, 3, 4, 9, 8, 7, 6, 1, 2, 0, 0, 3, 4}, {1, 1, 4, 4});
  Tensor xs = x.clone().requires_grad_();
  const auto [out, index] = max_pool2d_with_indices(xs, {2, 2});
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{5, 9, 7, 4}));
  EXPECT_EQ(index.to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 6, 8, 15}));
  sum(out).backward();
  EXPECT_EQ(xs.grad().to_vector<float>(),
            (std::vector<float>{0, 1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 1}));
}

TEST(Pool, AveragePoolingsSpreadTheGradientEvenly) {
  Tensor x = ones({1, 1, 4, 6}).requires_grad_();
  sum(adaptive_avg_pool2d(x, {2, 3})).backward();
  for (float g : x.grad().to_vector<float>()) EXPECT_FLOAT_EQ(g, 0.25f);
  Tensor y = ones({1, 1, 3, 3}).requires_grad_();
  const Tensor out = avg_pool2d(y, {2, 2}, {1, 1}, {1, 1}, false, false);
  for (float v : out.to_vector<float>()) EXPECT_FLOAT_EQ(v, 1.0f);  // padding not counted
  EXPECT_EQ(out.shape(), (Shape{1, 1, 4, 4}));
}

TEST(Layers, ConvNetForwardShapesAndParameters) {
  manual_seed(4);
  Sequential net{std::make_shared<Conv2d>(1, 8, Size2{3, 3}), std::make_shared<MaxPool2d>(Size2{2, 2}),
                 std::make_shared<Dropout2d>(0.25), std::make_shared<Flatten>(),
                 std::make_shared<Linear>(8 * 5 * 5, 10)};
  std::vector<std::string> names;
  for (const auto& [name, tensor] : net.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "4.weight", "4.bias"}));
  EXPECT_EQ(net.forward(randn({3, 1, 12, 12})).shape(), (Shape{3, 10}));
  const auto& conv = dynamic_cast<Conv2d&>(*net[0]);
  EXPECT_LE(max(abs(conv.weight)).item<float>(), 1.0 / 3.0);  // 1 / sqrt(1 * 3 * 3)
  net.eval();
  const Tensor x = randn({2, 1, 12, 12});
  EXPECT_TRUE(allclose(net.forward(x), net.forward(x)));  // no dropout in eval
}

TEST(Layers, BatchNormTracksRunningStatisticsInTraining) {
  BatchNorm2d bn(2, 1e-5, 0.5);
  const Tensor x = from_vector(std::vector<float>{1, 3, 1, 3, 10, 10, 10, 10}, {1, 2, 2, 2});
  const Tensor y = bn.forward(x);
  // Channel 0: mean 2, biased variance 1; channel 1: constant.
  EXPECT_NEAR(y.to_vector<float>()[0], -1.0f, 1e-4);
  EXPECT_NEAR(bn.running_mean.to_vector<float>()[0], 1.0f, 1e-6);
  EXPECT_NEAR(bn.running_var.to_vector<float>()[0], 0.5f + 0.5f * 4.0f / 3.0f, 1e-6);  // unbiased: 4/3
  EXPECT_EQ(bn.num_batches_tracked.item<std::int64_t>(), 1);
  bn.eval();
  const Tensor z = bn.forward(x);
  EXPECT_NEAR(z.to_vector<float>()[0], (1.0f - 1.0f) / std::sqrt(0.5f + 2.0f / 3.0f + 1e-5f), 1e-5);
  EXPECT_EQ(bn.num_batches_tracked.item<std::int64_t>(), 1);
  EXPECT_EQ(bn.state_dict().size(), 5u);
}

TEST(Layers, GroupNormNormalizesEachGroupOfEachSample) {
  GroupNorm gn(2, 4);
  const Tensor y = gn.forward(randn({3, 4, 5}));
  const Tensor grouped = y.reshape({3, 2, 10});
  EXPECT_TRUE(allclose(mean(grouped, {2}), zeros({3, 2}), 1e-5, 1e-5));
  EXPECT_TRUE(allclose(var(grouped, {2}, false, 0), ones({3, 2}), 1e-3, 1e-3));
}

}  // namespace
}  // namespace kael::nn
