// The tensor library's named backward rules (src/tensor/backward.hpp), each called alone on
// the values its forward saves, against central finite differences of the op's forward in F64.
// The torch comparisons of the same ops through autograd are tests/python/test_tensor_vs_torch.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "kernels/random.hpp"
#include "tensor/backward.hpp"
#include "tensor_backward_testing.hpp"

namespace kael {
namespace {

using tensor_detail::cross_entropy_backward;
using tensor_detail::dropout_backward;
using tensor_detail::gelu_backward;
using tensor_detail::layer_norm_backward;
using tensor_detail::log_softmax_backward;
using tensor_detail::matmul_backward;
using tensor_detail::pick_columns_backward;
using tensor_detail::relu_backward;
using tensor_detail::scaled_dot_product_attention_backward;
using tensor_detail::scaled_dot_product_attention_heads_backward;
using tensor_detail::softmax_backward;

using tensor_backward_testing::expect_close;
using tensor_backward_testing::numeric_gradient;

TEST(TensorBackwardRules, LayerNorm) {
  manual_seed(1);
  const std::int64_t rows = 5, C = 13;
  const Tensor x = add(mul(randn({rows, C}, DType::F64), 2.0), 3.0), w = randn({C}, DType::F64), b = randn({C}, DType::F64);
  const Tensor g = randn({rows, C}, DType::F64);
  // What the forward saves: each row's mean and rstd (biased variance).
  const Tensor mean = kael::mean(x, {1}, true);
  const Tensor centered = sub(x, mean);
  const Tensor rstd = div(ones_like(mean), sqrt(add(kael::mean(mul(centered, centered), {1}, true), 1e-5)));
  for (bool affine : {true, false}) {
    const Tensor weight = affine ? w : Tensor();
    const auto grads = layer_norm_backward(g.to(DType::F32), x.to(DType::F32), affine ? w.to(DType::F32) : Tensor(),
                                           mean.to(DType::F32), rstd.to(DType::F32));
    ASSERT_EQ(grads.size(), 3u);
    const std::string what = affine ? "affine" : "plain";
    expect_close(grads[0], numeric_gradient([&](const Tensor& v) { return layer_norm(v, {C}, weight, b); }, x, g), 1e-4,
                 what + " dx");
    if (affine)
      expect_close(grads[1], numeric_gradient([&](const Tensor& v) { return layer_norm(x, {C}, v, b); }, w, g), 1e-4,
                   "dweight");
    else
      EXPECT_FALSE(grads[1].defined());
    expect_close(grads[2], numeric_gradient([&](const Tensor& v) { return layer_norm(x, {C}, weight, v); }, b, g), 1e-4,
                 what + " dbias");
  }
}

TEST(TensorBackwardRules, Gelu) {
  manual_seed(2);
  const Tensor x = mul(randn({7, 9}, DType::F64), 3.0), g = randn({7, 9}, DType::F64);
  for (const char* mode : {"tanh", "none"}) {
    const Tensor want = numeric_gradient([&](const Tensor& v) { return gelu(v, mode); }, x, g);
    expect_close(gelu_backward(g, x, mode), want, 1e-7, std::string(mode) + " F64");
    expect_close(gelu_backward(g.to(DType::F32), x.to(DType::F32), mode), want, 1e-5, std::string(mode) + " F32");
    // A transposed F32 input takes the same rule.
    expect_close(gelu_backward(g.T().to(DType::F32), x.T().to(DType::F32), mode), want.T(), 1e-5,
                 std::string(mode) + " F32 transposed");
  }
  EXPECT_THROW(gelu_backward(g, x, "sigmoid"), ValueError);
}

TEST(TensorBackwardRules, SoftmaxAndLogSoftmax) {
  manual_seed(3);
  const Tensor x = randn({4, 6}, DType::F64), g = randn({4, 6}, DType::F64);
  for (int dim : {0, 1}) {
    expect_close(softmax_backward(g, softmax(x, dim), dim),
                 numeric_gradient([&](const Tensor& v) { return softmax(v, dim); }, x, g), 1e-7,
                 "softmax dim " + std::to_string(dim));
    expect_close(log_softmax_backward(g, log_softmax(x, dim), dim),
                 numeric_gradient([&](const Tensor& v) { return log_softmax(v, dim); }, x, g), 1e-7,
                 "log_softmax dim " + std::to_string(dim));
  }
}

TEST(TensorBackwardRules, LogSoftmaxF32RowsInOnePass) {
  // F32 over the last dim takes the row path; rows wider than a vector and ragged.
  manual_seed(4);
  const Tensor x = randn({5, 37}, DType::F64), g = randn({5, 37}, DType::F64);
  const Tensor got = log_softmax_backward(g.to(DType::F32), log_softmax(x.to(DType::F32), 1), 1);
  ASSERT_EQ(got.dtype(), DType::F32);
  expect_close(got, numeric_gradient([](const Tensor& v) { return log_softmax(v, 1); }, x, g), 1e-5, "log_softmax F32");
}

TEST(TensorBackwardRules, PickColumns) {
  // nll_loss's pick: d(sum(g_i x[i, ids_i]))/dx is g_i at (i, ids_i), 0 elsewhere, in x's dtype.
  const Tensor g = tensor({0.5, -2.0, 3.0});
  const Tensor ids = tensor({4, 0, 4}, DType::I64);
  for (DType dt : {DType::F32, DType::F64}) {
    const Tensor got = pick_columns_backward(g, ids, 5, dt);
    ASSERT_EQ(got.dtype(), dt);
    ASSERT_EQ(got.shape(), (Shape{3, 5}));
    for (std::int64_t i = 0; i < 3; ++i)
      for (std::int64_t j = 0; j < 5; ++j)
        EXPECT_EQ(got.value_as_double(i * 5 + j), j == ids.value_as_double(i) ? g.value_as_double(i) : 0.0)
            << i << ", " << j;
  }
}

TEST(TensorBackwardRules, CrossEntropy) {
  manual_seed(4);
  const std::int64_t N = 6, C = 11, ignore = -100;
  const Tensor logits = mul(randn({N, C}, DType::F64), 2.0);
  const Tensor ids = from_vector(std::vector<std::int64_t>{3, ignore, 0, 10, 7, 3}, {N});
  const Tensor g = full({}, 1.7, DType::F64);
  const Tensor want = numeric_gradient([&](const Tensor& v) { return cross_entropy(v, ids, ignore); }, logits, g);
  for (DType dt : {DType::F64, DType::F32}) {
    const Tensor got = cross_entropy_backward(g.to(dt), logits.to(dt), ids, ignore, 1.0 / 5.0);  // 5 rows counted
    expect_close(got, want, dt == DType::F64 ? 1e-7 : 1e-5, dt == DType::F64 ? "F64" : "F32");
    for (std::int64_t j = 0; j < C; ++j) EXPECT_EQ(got.value_as_double(C + j), 0.0) << "ignored row";
  }
}

TEST(TensorBackwardRules, MatmulWithBroadcastBatch) {
  manual_seed(5);
  const Tensor a = randn({3, 4}, DType::F64), b = randn({2, 4, 5}, DType::F64), g = randn({2, 3, 5}, DType::F64);
  const auto grads = matmul_backward(g, a, b, true, true);
  expect_close(grads[0], numeric_gradient([&](const Tensor& v) { return matmul(v, b); }, a, g), 1e-7, "da");
  expect_close(grads[1], numeric_gradient([&](const Tensor& v) { return matmul(a, v); }, b, g), 1e-7, "db");
  const auto only_b = matmul_backward(g, a, b, false, true);
  EXPECT_FALSE(only_b[0].defined());
  expect_close(only_b[1], grads[1], 0.0, "db alone");
}

TEST(TensorBackwardRules, Relu) {
  manual_seed(6);
  const Tensor x = randn({6, 7}, DType::F64), g = randn({6, 7}, DType::F64);
  const Tensor want = numeric_gradient([](const Tensor& v) { return relu(v); }, x, g);
  expect_close(relu_backward(g, relu(x)), want, 1e-7, "F64");
  expect_close(relu_backward(g.to(DType::F32), relu(x.to(DType::F32))), want, 1e-6, "F32");
  expect_close(relu_backward(g.T().to(DType::F32), relu(x.T().to(DType::F32))), want.T(), 1e-6, "F32 transposed");
  // torch's threshold_backward: 0 where the output is <= 0 (at 0 too, whatever g, inf and NaN
  // included), g where it is positive or NaN.
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (DType dt : {DType::F32, DType::F64}) {
    const Tensor y = from_vector(std::vector<double>{0.0, -0.0, 0.0, 2.0, nan}, {5}).to(dt);
    const Tensor grad = from_vector(std::vector<double>{1.0, 1.0, inf, 3.0, 4.0}, {5}).to(dt);
    const Tensor got = relu_backward(grad, y);
    const std::vector<double> expected{0.0, 0.0, 0.0, 3.0, 4.0};
    for (std::int64_t i = 0; i < 5; ++i) EXPECT_EQ(got.value_as_double(i), expected[static_cast<std::size_t>(i)]) << i;
  }
}

TEST(TensorBackwardRules, Dropout) {
  manual_seed(7);
  const Tensor g = randn({5, 8}, DType::F64);
  const Tensor keep = ge(rand({5, 8}, DType::F64), 0.3);
  const double scale = 1.0 / (1.0 - 0.3);
  for (DType dt : {DType::F64, DType::F32, DType::F16}) {
    // The reference: torch's product of g with its noise tensor, the scaled mask in g's dtype.
    const Tensor want = mul(g.to(dt), mul(keep.to(dt), scale));
    expect_close(dropout_backward(g.to(dt), keep, scale), want, 0.0, std::string(dtype_name(dt)));
    expect_close(dropout_backward(g.T().to(dt), keep.T(), scale), want.T(), 0.0,
                 std::string(dtype_name(dt)) + " transposed");
  }
  // A product, not a select: a NaN gradient stays NaN where the element was dropped.
  const Tensor dropped = from_vector(std::vector<bool>{false, true}, {2});
  const Tensor nan_g = full({2}, std::numeric_limits<double>::quiet_NaN(), DType::F32);
  const Tensor got = dropout_backward(nan_g, dropped, 2.0);
  EXPECT_TRUE(std::isnan(got.value_as_double(0)));
  EXPECT_TRUE(std::isnan(got.value_as_double(1)));
  EXPECT_THROW(dropout_backward(nan_g, dropped.to(DType::F32), 2.0), ValueError);
  EXPECT_THROW(dropout_backward(full({3}, 1.0, DType::F32), dropped, 2.0), ValueError);
}

TEST(TensorBackwardRules, DropoutRecordsItsMask) {
  // On ones the output is the scaled mask, so the recorded backward must give g * output.
  manual_seed(8);
  const Tensor x = ones({6, 9}, DType::F32).requires_grad_();
  const Tensor y = dropout(x, 0.4);
  const Tensor g = randn({6, 9}, DType::F32);
  y.backward(g);
  expect_close(x.grad(), mul(g, y.detach()), 0.0, "grad");
}

TEST(TensorBackwardRules, DropoutRefusesAProbabilityOutsideZeroToOne) {
  for (double p : {-0.1, 1.5, std::numeric_limits<double>::quiet_NaN()})
    EXPECT_THROW(dropout(ones({4}, DType::F32), p), ValueError) << p;
}

// The kernel form's rule against finite differences of the composed attention in F64 through
// the same mask (kernels::DropoutMask{p, seed}, element index = probs index), on a length
// that is no multiple of the kernels' 16-wide panels and an odd head size.
TEST(TensorBackwardRules, ScaledDotProductAttention) {
  manual_seed(9);
  const std::int64_t G = 3, L = 19, E = 5;
  const Tensor q = randn({G, L, E}, DType::F64), k = randn({G, L, E}, DType::F64), v = randn({G, L, E}, DType::F64);
  const Tensor g = randn({G, L, E}, DType::F64);
  const Tensor causal = triu(full({L, L}, -std::numeric_limits<double>::infinity(), DType::F64), 1);
  const auto probs_of = [&](const Tensor& a, const Tensor& b) {
    return softmax(add(div(matmul(a, b.transpose(-1, -2)), std::sqrt(static_cast<double>(E))), causal), -1);
  };
  const std::uint64_t seed = 77;
  for (double p : {0.0, 0.3}) {
    const kernels::DropoutMask mask{static_cast<float>(p), seed, 0, 0};
    std::vector<double> factors(static_cast<std::size_t>(G * L * L));
    for (std::size_t i = 0; i < factors.size(); ++i) factors[i] = p > 0 ? mask.factor(i) : 1.0;
    const Tensor factor = from_vector(factors, {G, L, L});
    const auto attention = [&](const Tensor& a, const Tensor& b, const Tensor& c) {
      return matmul(mul(probs_of(a, b), factor), c);
    };
    const auto f32 = [](const Tensor& t) { return t.to(DType::F32); };
    const auto grads = scaled_dot_product_attention_backward(f32(g), f32(q), f32(k), f32(v), f32(probs_of(q, k)), p, seed);
    ASSERT_EQ(grads.size(), 3u);
    const std::string what = p > 0 ? " (dropout)" : "";
    expect_close(grads[0], numeric_gradient([&](const Tensor& x) { return attention(x, k, v); }, q, g), 1e-5, "dq" + what);
    expect_close(grads[1], numeric_gradient([&](const Tensor& x) { return attention(q, x, v); }, k, g), 1e-5, "dk" + what);
    expect_close(grads[2], numeric_gradient([&](const Tensor& x) { return attention(q, k, x); }, v, g), 1e-5, "dv" + what);
  }
  const Tensor x = randn({G, L, E}, DType::F32), probs = softmax(randn({G, L, L}, DType::F32), -1);
  EXPECT_THROW(scaled_dot_product_attention_backward(x, x, x, x, probs.narrow(2, 0, L - 1), 0.0, seed), ValueError);
  EXPECT_THROW(scaled_dot_product_attention_backward(x, x.transpose(0, 1), x, x, probs, 0.0, seed), ValueError);
  EXPECT_THROW(scaled_dot_product_attention_backward(x, x, x, x, probs, 1.0, seed), ValueError);
}

// The heads form reads q, k, v where they lie, the heads of one (B, L, 3C + 2) tensor's rows,
// and writes its gradients in their layout: to the bit those of the form above on the same
// values copied to (B H, L, E), with and without dropout.
TEST(TensorBackwardRules, ScaledDotProductAttentionOnHeads) {
  manual_seed(10);
  const std::int64_t B = 2, H = 3, L = 19, E = 5, C = H * E, ld = 3 * C + 2;
  const Tensor rows = randn({B, L, ld}, DType::F32), g = randn({B, H, L, E}, DType::F32);
  const auto head = [&](int i) { return rows.narrow(2, i * C, C).view({B, L, H, E}).transpose(1, 2); };
  const Tensor q = head(0), k = head(1), v = head(2);
  const auto flat = [&](const Tensor& t) { return t.contiguous().reshape({B * H, L, E}); };
  const Tensor probs = softmax(randn({B * H, L, L}, DType::F32), -1);
  const auto same_bits = [](const Tensor& a, const Tensor& b) {
    return a.shape() == b.shape() && std::equal(a.data<float>(), a.data<float>() + a.numel(), b.data<float>());
  };
  for (double p : {0.0, 0.3}) {
    const auto want = scaled_dot_product_attention_backward(flat(g), flat(q), flat(k), flat(v), probs, p, 77);
    const auto got = scaled_dot_product_attention_heads_backward(g, q, k, v, probs, ld, p, 77, 0, 0);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(got[i].strides(), q.strides());
      EXPECT_TRUE(same_bits(flat(got[i]), want[static_cast<std::size_t>(i)].contiguous())) << i << " at p " << p;
    }
  }
  EXPECT_THROW(scaled_dot_product_attention_heads_backward(g, q, k, v, probs, ld + 1, 0.0, 77, 0, 0), ValueError);
  const Tensor dense_q = q.contiguous();
  EXPECT_THROW(scaled_dot_product_attention_heads_backward(g, dense_q, k, v, probs, ld, 0.0, 77, 0, 0), ValueError);
}

}  // namespace
}  // namespace kael
