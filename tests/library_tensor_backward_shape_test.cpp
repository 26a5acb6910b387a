// The named backward rules of the views, joins, selection, pooling, convolution, recurrent cells
// and composed attention (src/tensor/backward.hpp), each called alone on the values its forward
// saves, against central finite differences of the op's forward in F64, on ragged shapes. The
// torch comparisons of the same ops through autograd are tests/python (test_tensor_vs_torch.py,
// test_nn_*_vs_torch.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "kael/tensor/autograd.hpp"
#include "kael/tensor/conv.hpp"
#include "kael/tensor/ops.hpp"
#include "kael/tensor/pool.hpp"
#include "kael/tensor/rnn.hpp"
#include "tensor/backward.hpp"
#include "tensor_backward_testing.hpp"

namespace kael {
namespace {

using namespace tensor_detail;

using tensor_backward_testing::expect_close;
using tensor_backward_testing::numeric_gradient;

TEST(TensorShapeBackwardRules, CatAlongAMiddleDimOfUnequalSizes) {
  manual_seed(11);
  const std::vector<Tensor> parts{randn({2, 3, 4}, DType::F64), randn({2, 1, 4}, DType::F64), randn({2, 5, 4}, DType::F64)};
  const Tensor g = randn({2, 9, 4}, DType::F64);
  const auto grads = cat_backward(g, 1, {0, 3, 4, 9});
  ASSERT_EQ(grads.size(), 3u);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const auto f = [&](const Tensor& v) {
      std::vector<Tensor> moved = parts;
      moved[i] = v;
      return cat(moved, 1);
    };
    expect_close(grads[i], numeric_gradient(f, parts[i], g), 1e-7, "input " + std::to_string(i));
  }
}

TEST(TensorShapeBackwardRules, IndexSelectWithRepeatedIds) {
  manual_seed(12);
  const Tensor a = randn({4, 5, 3}, DType::F64);
  const Tensor ids = from_vector(std::vector<std::int64_t>{3, 0, 3, 4, 3, 1}, {6});
  const Tensor g = randn({4, 6, 3}, DType::F64);
  const Tensor got = index_select_backward(g, a.shape(), 1, ids);
  expect_close(got, numeric_gradient([&](const Tensor& v) { return index_select(v, 1, ids); }, a, g), 1e-7, "dim 1");
  // Id 2 is never picked: its slice gets nothing.
  for (std::int64_t i = 0; i < 4; ++i)
    for (std::int64_t j = 0; j < 3; ++j) EXPECT_EQ(got.select(0, i).select(0, 2).select(0, j).item<double>(), 0.0);
}

TEST(TensorShapeBackwardRules, GatherRows) {
  manual_seed(13);
  const std::int64_t rows = 4, n = 6, k = 5;
  const Tensor a = randn({rows, n}, DType::F64);
  // Repeated positions in a row add up; position 5 of row 0 is never picked.
  const Tensor index = from_vector(std::vector<std::int64_t>{0, 2, 2, 4, 0,  //
                                                             5, 5, 5, 1, 3,  //
                                                             1, 0, 4, 3, 2,  //
                                                             3, 3, 0, 5, 4},
                                   {rows, k});
  const Tensor g = randn({rows, k}, DType::F64);
  const Tensor want = numeric_gradient([&](const Tensor& v) { return gather(v, 1, index); }, a, g);
  expect_close(gather_backward(g, index, n, DType::F64), want, 1e-7, "F64");
  const Tensor f32 = gather_backward(g.to(DType::F32), index, n, DType::F32);
  EXPECT_EQ(f32.dtype(), DType::F32);
  expect_close(f32, want, 1e-6, "F32");
}

TEST(TensorShapeBackwardRules, MaxPool2dWithStridePaddingDilationAndCeilMode) {
  manual_seed(14);
  const Tensor x = randn({2, 3, 7, 8}, DType::F64);
  const Size2 kernel{3, 2}, stride{2, 3}, padding{1, 1}, dilation{2, 1};
  for (bool ceil_mode : {false, true}) {
    const auto [out, indices] = max_pool2d_with_indices(x, kernel, stride, padding, dilation, ceil_mode);
    const Tensor g = randn(out.shape(), DType::F64);
    const Tensor want = numeric_gradient(
        [&](const Tensor& v) { return max_pool2d(v, kernel, stride, padding, dilation, ceil_mode); }, x, g);
    const std::string what = ceil_mode ? "ceil_mode" : "floor";
    expect_close(max_pool2d_backward(g, indices, x.shape()), want, 1e-7, what);
    expect_close(max_pool2d_backward(g.to(DType::F32), indices, x.shape()), want, 1e-6, what + " F32");
  }
}

TEST(TensorShapeBackwardRules, MaxPool2dSendsTiesToTheFirstLargest) {
  // Windows of 2 x 2, stride 1, over values with ties: each output's gradient goes to the first
  // largest of its window in row-major order (torch's rule), found here by a plain loop.
  const std::int64_t H = 3, W = 4;
  const std::vector<double> values{1, 2, 2, 0,  //
                                   2, 2, 1, 2,  //
                                   0, 1, 2, 2};
  const Tensor x = from_vector(values, {1, 1, H, W});
  const auto [out, indices] = max_pool2d_with_indices(x, {2, 2}, {1, 1});
  const Tensor g = from_vector(std::vector<double>{1, 10, 100, 1000, 10000, 100000}, {1, 1, 2, 3});
  const Tensor got = max_pool2d_backward(g, indices, x.shape());
  std::vector<double> want(static_cast<std::size_t>(H * W), 0.0);
  for (std::int64_t oy = 0; oy < 2; ++oy)
    for (std::int64_t ox = 0; ox < 3; ++ox) {
      std::int64_t best = oy * W + ox;
      for (std::int64_t i = 0; i < 2; ++i)
        for (std::int64_t j = 0; j < 2; ++j) {
          const std::int64_t at = (oy + i) * W + ox + j;
          if (values[static_cast<std::size_t>(at)] > values[static_cast<std::size_t>(best)]) best = at;
        }
      want[static_cast<std::size_t>(best)] += g.value_as_double(oy * 3 + ox);
    }
  for (std::int64_t i = 0; i < H * W; ++i) EXPECT_EQ(got.value_as_double(i), want[static_cast<std::size_t>(i)]) << i;
  EXPECT_THROW(max_pool2d_backward(g, full({1, 1, 2, 3}, static_cast<double>(H * W), DType::I64), x.shape()),
               IndexError);
  EXPECT_THROW(max_pool2d_backward(g, indices, {1, 2, H, W}), ValueError);
}

TEST(TensorShapeBackwardRules, AvgPool2dBothCountsAndCeilMode) {
  manual_seed(15);
  const Tensor x = randn({2, 2, 7, 6}, DType::F64);
  const Size2 kernel{3, 4}, stride{2, 3}, padding{1, 2};
  for (bool ceil_mode : {false, true})
    for (bool count_include_pad : {true, false})
      for (std::int64_t divisor : {std::int64_t{0}, std::int64_t{5}}) {
        const auto f = [&](const Tensor& v) {
          return avg_pool2d(v, kernel, stride, padding, ceil_mode, count_include_pad, divisor);
        };
        const Tensor out = f(x);
        const Tensor g = randn(out.shape(), DType::F64);
        const std::string what = std::string(ceil_mode ? "ceil" : "floor") + (count_include_pad ? " with" : " without") +
                                 " padding counted, divisor " + std::to_string(divisor);
        expect_close(avg_pool2d_backward(g, x.shape(), kernel, stride, padding, count_include_pad, divisor),
                     numeric_gradient(f, x, g), 1e-7, what);
      }
  // stride 0 is the kernel size, as the forward's default.
  const auto f = [&](const Tensor& v) { return avg_pool2d(v, {2, 3}); };
  const Tensor g = randn(f(x).shape(), DType::F64);
  expect_close(avg_pool2d_backward(g, x.shape(), {2, 3}, {0, 0}, {0, 0}, true, 0), numeric_gradient(f, x, g), 1e-7,
               "default stride");
  EXPECT_THROW(avg_pool2d_backward(g, x.shape(), {0, 3}, {0, 0}, {0, 0}, true, 0), ValueError);
}

TEST(TensorShapeBackwardRules, AdaptiveAvgPool2dOnSizesThatDoNotDivide) {
  manual_seed(16);
  const Tensor x = randn({2, 3, 7, 10}, DType::F64);
  for (const Size2 size : {Size2{3, 4}, Size2{5, 7}, Size2{7, 10}, Size2{1, 1}}) {
    const auto f = [&](const Tensor& v) { return adaptive_avg_pool2d(v, size); };
    const Tensor g = randn(f(x).shape(), DType::F64);
    expect_close(adaptive_avg_pool2d_backward(g, x.shape()), numeric_gradient(f, x, g), 1e-7,
                 "output " + std::to_string(size[0]) + " x " + std::to_string(size[1]));
  }
}

// conv2d in F64 by its definition, the reference the F32 rule is held to.
Tensor reference_conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, Size2 stride, Size2 padding,
                        Size2 dilation, std::int64_t groups) {
  const Tensor x = input.contiguous(), w = weight.contiguous(), b = bias.contiguous();
  const std::int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const std::int64_t O = w.size(0), Cg = w.size(1), kh = w.size(2), kw = w.size(3), Og = O / groups;
  const std::int64_t Ho = (H + 2 * padding[0] - dilation[0] * (kh - 1) - 1) / stride[0] + 1;
  const std::int64_t Wo = (W + 2 * padding[1] - dilation[1] * (kw - 1) - 1) / stride[1] + 1;
  Tensor out = zeros({N, O, Ho, Wo}, DType::F64);
  const double* xd = x.data<double>();
  const double* wd = w.data<double>();
  double* od = out.data<double>();
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t o = 0; o < O; ++o)
      for (std::int64_t oy = 0; oy < Ho; ++oy)
        for (std::int64_t ox = 0; ox < Wo; ++ox) {
          double total = b.data<double>()[o];
          for (std::int64_t c = 0; c < Cg; ++c)
            for (std::int64_t i = 0; i < kh; ++i)
              for (std::int64_t j = 0; j < kw; ++j) {
                const std::int64_t iy = oy * stride[0] - padding[0] + i * dilation[0];
                const std::int64_t ix = ox * stride[1] - padding[1] + j * dilation[1];
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                total += xd[((n * C + (o / Og) * Cg + c) * H + iy) * W + ix] * wd[((o * Cg + c) * kh + i) * kw + j];
              }
          od[((n * O + o) * Ho + oy) * Wo + ox] = total;
        }
  return out;
}

TEST(TensorShapeBackwardRules, Conv2dWithGroupsStridePaddingAndDilation) {
  manual_seed(17);
  const Size2 stride{2, 1}, padding{1, 2}, dilation{2, 1};
  const std::int64_t groups = 2;
  const Tensor x = randn({2, 4, 7, 6}, DType::F64), w = randn({6, 2, 3, 2}, DType::F64), b = randn({6}, DType::F64);
  const auto f32 = [](const Tensor& t) { return t.to(DType::F32); };
  const Tensor out = reference_conv2d(x, w, b, stride, padding, dilation, groups);
  // The reference agrees with the F32 forward whose backward is under test.
  expect_close(conv2d(f32(x), f32(w), f32(b), stride, padding, dilation, groups), out, 1e-5, "forward");
  const Tensor g = randn(out.shape(), DType::F64);
  const auto grads = conv2d_backward(f32(g), f32(x), f32(w), x.shape(), w.shape(), stride, padding, dilation, groups,
                                     {true, true, true});
  ASSERT_EQ(grads.size(), 3u);
  const auto conv_of = [&](const Tensor& xi, const Tensor& wi, const Tensor& bi) {
    return reference_conv2d(xi, wi, bi, stride, padding, dilation, groups);
  };
  expect_close(grads[0], numeric_gradient([&](const Tensor& v) { return conv_of(v, w, b); }, x, g), 1e-5, "dinput");
  expect_close(grads[1], numeric_gradient([&](const Tensor& v) { return conv_of(x, v, b); }, w, g), 1e-5, "dweight");
  expect_close(grads[2], numeric_gradient([&](const Tensor& v) { return conv_of(x, w, v); }, b, g), 1e-5, "dbias");
  // The weight is read for dinput only: without it, dweight alone.
  const auto only_weight = conv2d_backward(f32(g), f32(x), Tensor(), x.shape(), w.shape(), stride, padding, dilation,
                                           groups, {false, true, false});
  EXPECT_FALSE(only_weight[0].defined());
  EXPECT_FALSE(only_weight[2].defined());
  expect_close(only_weight[1], grads[1], 0.0, "dweight alone");
  EXPECT_THROW(conv2d_backward(f32(g), f32(x), Tensor(), x.shape(), w.shape(), stride, padding, dilation, groups,
                               {true, false, false}),
               ValueError);
  EXPECT_THROW(conv2d_backward(f32(g).narrow(3, 0, 2), f32(x), f32(w), x.shape(), w.shape(), stride, padding, dilation,
                               groups, {true, true, true}),
               ValueError);
}

TEST(TensorShapeBackwardRules, LstmCell) {
  manual_seed(18);
  const std::int64_t B = 3, H = 5;
  const Tensor gates = mul(randn({B, 4 * H}, DType::F64), 1.5), c = randn({B, H}, DType::F64);
  const Tensor g = randn({B, 2 * H}, DType::F64);
  const auto cell = [](const Tensor& a, const Tensor& state) {
    const auto [h_next, c_next] = lstm_cell_fused(a, state);
    return cat({h_next, c_next}, 1);
  };
  const auto grads = lstm_cell_backward(g, gates, c);
  ASSERT_EQ(grads.size(), 2u);
  expect_close(grads[0], numeric_gradient([&](const Tensor& v) { return cell(v, c); }, gates, g), 1e-7, "dgates");
  expect_close(grads[1], numeric_gradient([&](const Tensor& v) { return cell(gates, v); }, c, g), 1e-7, "dc");
  EXPECT_THROW(lstm_cell_backward(g.narrow(1, 0, H), gates, c), ValueError);
}

TEST(TensorShapeBackwardRules, GruCell) {
  manual_seed(19);
  const std::int64_t B = 3, H = 5;
  const Tensor gi = mul(randn({B, 3 * H}, DType::F64), 1.5), gh = randn({B, 3 * H}, DType::F64);
  const Tensor h = randn({B, H}, DType::F64), g = randn({B, H}, DType::F64);
  const auto grads = gru_cell_backward(g, gi, gh, h);
  ASSERT_EQ(grads.size(), 3u);
  expect_close(grads[0], numeric_gradient([&](const Tensor& v) { return gru_cell_fused(v, gh, h); }, gi, g), 1e-7, "dgi");
  expect_close(grads[1], numeric_gradient([&](const Tensor& v) { return gru_cell_fused(gi, v, h); }, gh, g), 1e-7, "dgh");
  expect_close(grads[2], numeric_gradient([&](const Tensor& v) { return gru_cell_fused(gi, gh, v); }, h, g), 1e-7, "dh");
  EXPECT_THROW(gru_cell_backward(g, gi, gh.narrow(1, 0, H), h), ValueError);
}

// One LSTM layer over its input products, as rnn.cpp runs it: (T + 2, B, H) of every step's h,
// then h_n and c_n; `saved` (when given) gets what its node keeps: gates_all, hs, cs.
Tensor lstm_layer_reference(const Tensor& gi_all, const Tensor& h0, const Tensor& c0, const Tensor& w_hh,
                            const Tensor& b_hh, std::vector<Tensor>* saved = nullptr) {
  const std::int64_t T = gi_all.size(0);
  std::vector<Tensor> gates_all, hs{h0}, cs{c0};
  for (std::int64_t t = 0; t < T; ++t) {
    gates_all.push_back(add(gi_all.select(0, t), linear(hs.back(), w_hh, b_hh)));
    const auto [h, c] = lstm_cell_fused(gates_all.back(), cs.back());
    hs.push_back(h);
    cs.push_back(c);
  }
  if (saved) *saved = {stack(gates_all, 0), stack(hs, 0), stack(cs, 0)};
  std::vector<Tensor> packed(hs.begin() + 1, hs.end());
  packed.push_back(hs.back());
  packed.push_back(cs.back());
  return stack(packed, 0);
}

TEST(TensorShapeBackwardRules, LstmLayer) {
  manual_seed(20);
  const std::int64_t T = 3, B = 2, H = 3;
  const Tensor gi_all = randn({T, B, 4 * H}, DType::F64), h0 = randn({B, H}, DType::F64), c0 = randn({B, H}, DType::F64);
  const Tensor w = mul(randn({4 * H, H}, DType::F64), 0.5), b = randn({4 * H}, DType::F64);
  const Tensor g = randn({T + 2, B, H}, DType::F64);
  std::vector<Tensor> saved;
  lstm_layer_reference(gi_all, h0, c0, w, b, &saved);
  const auto grads = lstm_backward(g, w, saved[0], saved[1], saved[2], true);
  ASSERT_EQ(grads.size(), 5u);
  const auto layer = [&](int which, const Tensor& v) {
    return lstm_layer_reference(which == 0 ? v : gi_all, which == 1 ? v : h0, which == 2 ? v : c0, which == 3 ? v : w,
                                which == 4 ? v : b);
  };
  const std::vector<Tensor> inputs{gi_all, h0, c0, w, b};
  const char* names[] = {"dgi_all", "dh0", "dc0", "dw_hh", "db_hh"};
  for (int i = 0; i < 5; ++i)
    expect_close(grads[static_cast<std::size_t>(i)],
                 numeric_gradient([&](const Tensor& v) { return layer(i, v); }, inputs[static_cast<std::size_t>(i)], g),
                 1e-7, names[i]);
  EXPECT_FALSE(lstm_backward(g, w, saved[0], saved[1], saved[2], false)[4].defined());
  EXPECT_THROW(lstm_backward(g.narrow(0, 0, T), w, saved[0], saved[1], saved[2], true), ValueError);
}

TEST(TensorShapeBackwardRules, AsStridedScatter) {
  manual_seed(21);
  const Tensor input = randn({5, 6}, DType::F64), src = randn({3}, DType::F64);  // src broadcasts over the view's rows
  const Shape size{2, 3};
  const std::vector<std::int64_t> stride{7, 2};
  const std::int64_t offset = 3;
  const Tensor g = randn({5, 6}, DType::F64);
  const auto grads = as_strided_scatter_backward(g, size, stride, offset, src.shape(), DType::F64);
  ASSERT_EQ(grads.size(), 2u);
  expect_close(grads[0],
               numeric_gradient([&](const Tensor& v) { return as_strided_scatter(v, src, size, stride, offset); }, input, g),
               1e-7, "dinput");
  expect_close(grads[1],
               numeric_gradient([&](const Tensor& v) { return as_strided_scatter(input, v, size, stride, offset); }, src, g),
               1e-7, "dsrc");
  EXPECT_EQ(as_strided_scatter_backward(g, size, stride, offset, src.shape(), DType::F32)[1].dtype(), DType::F32);
  EXPECT_THROW(as_strided_scatter_backward(g, {2, 3}, {30, 2}, offset, src.shape(), DType::F64), ValueError);
}

TEST(TensorShapeBackwardRules, SelectSliceAndCopy) {
  manual_seed(22);
  const Tensor x = randn({5, 7}, DType::F64);
  const Tensor g_select = randn({7}, DType::F64);
  expect_close(select_backward(g_select, x.shape(), 0, 2),
               numeric_gradient([](const Tensor& v) { return v.select(0, 2); }, x, g_select), 1e-7, "select");
  const Tensor g_slice = randn({5, 3}, DType::F64);
  expect_close(slice_backward(g_slice, x.shape(), 1, 1, 6, 2),
               numeric_gradient([](const Tensor& v) { return v.slice(1, 1, 6, 2); }, x, g_slice), 1e-7, "slice");
  // copy_ of a broadcast F64 source into an F32 tensor: nothing for the old values, g summed to the
  // source's shape in its dtype.
  const Tensor source = randn({1, 7}, DType::F64), g = randn({5, 7}, DType::F32);
  const auto grads = copy_backward(g, source.shape(), DType::F64);
  EXPECT_FALSE(grads[0].defined());
  EXPECT_EQ(grads[1].dtype(), DType::F64);
  expect_close(grads[1],
               numeric_gradient(
                   [&](const Tensor& v) {
                     Tensor dst = zeros({5, 7}, DType::F64);
                     dst.copy_(v);
                     return dst;
                   },
                   source, g.to(DType::F64)),
               1e-6, "copy_");
  EXPECT_EQ(to_backward(g, DType::F64).dtype(), DType::F64);
  EXPECT_FALSE(fill_backward(g).defined());
}

// The composed form's rule from the probabilities it recomputes, with batch dims that broadcast
// (q (2, 3, L, E), k (3, S, E), v (1, 3, S, Ev)), a float mask and a scale of its own.
TEST(TensorShapeBackwardRules, ScaledDotProductAttentionComposed) {
  manual_seed(23);
  const std::int64_t L = 4, S = 6, E = 5, Ev = 7;
  const double scale = 0.3;
  const Tensor q = randn({2, 3, L, E}, DType::F64), k = randn({3, S, E}, DType::F64), v = randn({1, 3, S, Ev}, DType::F64);
  const Tensor mask = randn({L, S}, DType::F64);
  const Tensor g = randn({2, 3, L, Ev}, DType::F64);
  const Tensor p = softmax(add(mul(matmul(q, k.transpose(-1, -2)), scale), mask), -1);
  const auto attention = [&](const Tensor& a, const Tensor& b, const Tensor& c) {
    return scaled_dot_product_attention(a, b, c, false, mask, scale);
  };
  const auto grads = scaled_dot_product_attention_math_backward(g, q, k, v, p, scale, {true, true, true});
  ASSERT_EQ(grads.size(), 3u);
  expect_close(grads[0], numeric_gradient([&](const Tensor& x) { return attention(x, k, v); }, q, g), 1e-7, "dq");
  expect_close(grads[1], numeric_gradient([&](const Tensor& x) { return attention(q, x, v); }, k, g), 1e-7, "dk");
  expect_close(grads[2], numeric_gradient([&](const Tensor& x) { return attention(q, k, x); }, v, g), 1e-7, "dv");
  const auto only_v = scaled_dot_product_attention_math_backward(g, q, k, v, p, scale, {false, false, true});
  EXPECT_FALSE(only_v[0].defined());
  EXPECT_FALSE(only_v[1].defined());
  expect_close(only_v[2], grads[2], 0.0, "dv alone");
}

}  // namespace
}  // namespace kael
