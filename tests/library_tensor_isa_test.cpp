// The tensor library on every kernel set (and 1 or 3 threads), each skipped by name where this
// CPU or build lacks it: the ops that reach the kernel table (matmul and linear on its GEMM,
// causal scaled_dot_product_attention on its attention kernel, threaded elementwise ops and
// sums) and their gradients, on ragged sizes, against the same ops computed in F64, which run
// plain loops.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "kernels_testing.hpp"

namespace kael {
namespace {

using kernels::test_util::every_isa_and_threads;
using kernels::test_util::isa_threads_name;
using kernels::test_util::OnEveryIsa;

// |a - b| <= tol * (1 + max |b|) elementwise, b computed in F64.
void expect_close(const Tensor& a, const Tensor& b, double tol, const char* what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  const double scale = 1.0 + max(abs(b.to(DType::F64))).item<double>();
  const double error = max(abs(a.to(DType::F64) - b.to(DType::F64))).item<double>();
  EXPECT_LE(error, tol * scale) << what << ": error " << error << " at scale " << scale;
}

class TensorOnEveryIsa : public OnEveryIsa {};

TEST_P(TensorOnEveryIsa, MatmulAndLinearWithGradients) {
  manual_seed(11);
  struct Case {
    Shape a, b;
    bool transpose_a;
  };
  for (const Case& c : {Case{{37, 53}, {53, 29}, false}, Case{{3, 1, 17, 65}, {2, 65, 9}, false},
                        Case{{70, 33}, {70, 19}, true}, Case{{1, 130}, {130, 7}, false}}) {
    const Tensor a0 = randn(c.a), b0 = randn(c.b);
    Tensor a = a0.clone().requires_grad_(), b = b0.clone().requires_grad_();
    Tensor a64 = a0.to(DType::F64).requires_grad_(), b64 = b0.to(DType::F64).requires_grad_();
    const Tensor out = c.transpose_a ? matmul(a.transpose(0, 1), b) : matmul(a, b);
    const Tensor out64 = c.transpose_a ? matmul(a64.transpose(0, 1), b64) : matmul(a64, b64);
    expect_close(out, out64, 1e-5, "matmul");
    const Tensor weight = randn(out.shape());
    sum(out * weight).backward();
    sum(out64 * weight.to(DType::F64)).backward();
    expect_close(a.grad(), a64.grad(), 1e-5, "matmul grad a");
    expect_close(b.grad(), b64.grad(), 1e-5, "matmul grad b");
  }
  const Tensor x = randn({5, 7, 45}), w = randn({21, 45}), bias = randn({21});
  expect_close(linear(x, w, bias), linear(x.to(DType::F64), w.to(DType::F64), bias.to(DType::F64)), 1e-5, "linear");
}

TEST_P(TensorOnEveryIsa, CausalAttentionWithGradients) {
  manual_seed(12);
  const Tensor q0 = randn({2, 3, 19, 16}), k0 = randn({2, 3, 19, 16}), v0 = randn({2, 3, 19, 16});
  Tensor q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(), v = v0.clone().requires_grad_();
  Tensor q64 = q0.to(DType::F64).requires_grad_(), k64 = k0.to(DType::F64).requires_grad_(),
         v64 = v0.to(DType::F64).requires_grad_();
  const Tensor out = scaled_dot_product_attention(q, k, v, true);  // F32 causal: the kernel
  const Tensor out64 = scaled_dot_product_attention(q64, k64, v64, true);
  expect_close(out, out64, 1e-5, "attention");
  const Tensor weight = randn(out.shape());
  sum(out * weight).backward();
  sum(out64 * weight.to(DType::F64)).backward();
  expect_close(q.grad(), q64.grad(), 1e-5, "attention grad q");
  expect_close(k.grad(), k64.grad(), 1e-5, "attention grad k");
  expect_close(v.grad(), v64.grad(), 1e-5, "attention grad v");
}

TEST_P(TensorOnEveryIsa, ThreadedElementwiseAndSums) {
  manual_seed(13);
  const Tensor a = randn({1 << 17}) , b = randn({1 << 17});
  const Tensor a64 = a.to(DType::F64), b64 = b.to(DType::F64);
  expect_close(a * b + a / (abs(b) + 1), a64 * b64 + a64 / (abs(b64) + 1), 1e-6, "elementwise");
  expect_close(exp(a), exp(a64), 1e-6, "exp");
  expect_close(sum(a), sum(a64), 1e-5, "sum");
  expect_close(sum(a.view({256, 512}), {1}), sum(a64.view({256, 512}), {1}), 1e-5, "row sums");
  expect_close(softmax(a.view({128, 1024}), -1), softmax(a64.view({128, 1024}), -1), 1e-6, "softmax");
  expect_close(layer_norm(a.view({512, 256}), {256}), layer_norm(a64.view({512, 256}), {256}), 1e-5, "layer_norm");
  // Rows longer than a block of the sum: a row's sum has one order, alone or among rows.
  const Tensor rows = a.view({4, 1 << 15});
  const std::vector<float> row_sums = sum(rows, {1}).to_vector<float>();
  for (std::int64_t r = 0; r < 4; ++r) EXPECT_EQ(row_sums[static_cast<std::size_t>(r)], sum(rows.select(0, r)).item<float>());
  expect_close(sum(rows, {1}), sum(a64.view({4, 1 << 15}), {1}), 1e-5, "long row sums");
  // max / min and their indices over either dim, threaded over rows.
  for (int dim : {0, 1}) {
    const Tensor m = a.view({256, 512}), m64 = a64.view({256, 512});
    expect_close(max(m, dim).first, max(m64, dim).first, 0, "max");
    expect_close(min(m, dim).first, min(m64, dim).first, 0, "min");
    EXPECT_EQ(argmax(m, dim).to_vector<std::int64_t>(), argmax(m64, dim).to_vector<std::int64_t>());
    EXPECT_EQ(max(m, dim).second.to_vector<std::int64_t>(), max(m64, dim).second.to_vector<std::int64_t>());
  }
}

// exp (and sigmoid and tanh, on it) through the kernel table's vector exp: NaN, infinities,
// overflow, underflow and subnormal results as the C library gives them, within one ulp, for
// contiguous, strided and broadcast inputs; F64 stays exact.
TEST_P(TensorOnEveryIsa, ExpSigmoidAndTanhKeepTheCLibrarySemantics) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> special = {nan, inf, -inf, 88.72f, 88.73f, 100.0f, -87.0f, -100.0f, -103.97f, -104.0f,
                                      -1e30f, 1e30f, 1e-40f, -1e-40f, 0.0f, -0.0f, 1.0f, -1.0f, 0.5f,
                                      0.62f, -0.63f, 1e-8f, -3e-4f, 9.0f, -20.0f};
  std::vector<float> values;
  for (int rep = 0; rep < 7; ++rep) values.insert(values.end(), special.begin(), special.end());  // 175: ragged
  const Tensor x = from_vector(values, {7, 25});
  const auto check = [&](const Tensor& input, const char* what) {
    const std::vector<float> in = input.contiguous().to_vector<float>(), out = exp(input).to_vector<float>();
    const std::vector<float> sig = sigmoid(input).to_vector<float>(), th = tanh(input).to_vector<float>();
    ASSERT_EQ(in.size(), out.size()) << what;
    for (std::size_t i = 0; i < in.size(); ++i) {
      const double want = std::exp(static_cast<double>(in[i]));
      const float rounded = static_cast<float>(want);
      if (std::isnan(in[i])) {
        EXPECT_TRUE(std::isnan(out[i]) && std::isnan(sig[i]) && std::isnan(th[i])) << what << " " << i;
        continue;
      }
      if (std::isinf(rounded) || rounded == 0.0f) {
        EXPECT_EQ(out[i], rounded) << what << " exp(" << in[i] << ")";
      } else {
        EXPECT_LE(std::abs(out[i] - want), std::nextafter(rounded, inf) - rounded) << what << " exp(" << in[i] << ")";
      }
      // The scalar form's formula, in float as before (0 once e^-x overflows).
      const float sig_want = 1.0f / (1.0f + std::exp(-in[i]));
      EXPECT_NEAR(sig[i], sig_want, 2.5e-7 * sig_want) << what << " sigmoid(" << in[i] << ")";
      const float th_want = static_cast<float>(std::tanh(static_cast<double>(in[i])));
      EXPECT_LE(std::abs(th[i] - th_want), std::abs(std::nextafter(th_want, 0.0f) - th_want)) << what << " tanh(" << in[i] << ")";
      EXPECT_EQ(std::signbit(th[i]), std::signbit(in[i])) << what << " tanh(" << in[i] << ")";
    }
  };
  check(x, "contiguous");
  check(x.T(), "transposed");
  check(x.narrow(1, 1, 23).slice(0, 0, 7, 2), "sliced");
  check(x.narrow(0, 0, 1).expand({5, 25}), "expanded");
  const Tensor x64 = x.to(DType::F64);
  const std::vector<double> e64 = exp(x64).to_vector<double>(), in64 = x64.to_vector<double>();
  for (std::size_t i = 0; i < e64.size(); ++i) {
    if (!std::isnan(in64[i])) {
      EXPECT_EQ(e64[i], std::exp(in64[i])) << in64[i];
    }
  }
  EXPECT_EQ(sigmoid(from_vector(std::vector<float>{-inf, inf, -200.0f, 200.0f}, {4})).to_vector<float>(),
            (std::vector<float>{0.0f, 1.0f, 0.0f, 1.0f}));
  // A large F32 exp and softmax on the pool, against F64.
  manual_seed(14);
  const Tensor a = mul(randn({3, 40001}), 20.0);
  expect_close(exp(mul(a, 0.1)), exp(mul(a.to(DType::F64), 0.1)), 1e-6, "exp, large");
  expect_close(log_softmax(a, -1), log_softmax(a.to(DType::F64), -1), 1e-6, "log_softmax, wide");
}

INSTANTIATE_TEST_SUITE_P(Sets, TensorOnEveryIsa, every_isa_and_threads(), isa_threads_name);

}  // namespace
}  // namespace kael
