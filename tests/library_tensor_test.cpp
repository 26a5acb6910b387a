// The tensor library through the whole of kael: the book's first snippet byte for byte, broadcasting, promotion,
// views, autograd rules and errors. Values against torch live in tests/python.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "kael/io/safetensors.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"

namespace kael {
// sin has no op of its own yet; the target is computed outside the library.
Tensor sin_reference(const Tensor& x) {
  std::vector<float> v = x.contiguous().to_vector<float>();
  for (float& e : v) e = std::sin(e);
  return from_vector(v, x.shape());
}
namespace {

TEST(TensorBook, FirstSnippetWritesTheBooksBytes) {
  const auto path = std::filesystem::temp_directory_path() / "kael_book_snippet.safetensors";
  io::save_safetensors(path, {{"b", ones({2, 2})}, {"a", arange(0, 3, 1, DType::I64)}});
  std::ifstream in(path, std::ios::binary);
  const std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), {});
  std::filesystem::remove(path);
  ASSERT_EQ(bytes.size(), 160u);
  EXPECT_EQ(bytes[0], 112);  // header length, little-endian u64
  for (int i = 1; i < 8; ++i) EXPECT_EQ(bytes[static_cast<std::size_t>(i)], 0);
  const std::string header(bytes.begin() + 8, bytes.begin() + 120);
  EXPECT_EQ(header,
            R"({"a":{"data_offsets":[0,24],"dtype":"I64","shape":[3]},"b":{"data_offsets":[24,40],"dtype":"F32","shape":[2,2]}})");
  const unsigned char data[40] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0,
                                  0, 0, 0x80, 0x3f, 0, 0, 0x80, 0x3f, 0, 0, 0x80, 0x3f, 0, 0, 0x80, 0x3f};
  for (int i = 0; i < 40; ++i) EXPECT_EQ(bytes[static_cast<std::size_t>(120 + i)], data[i]) << i;
}

TEST(TensorOps, BroadcastingAddsRowsAndColumns) {
  const Tensor a = arange(0, 3).reshape({3, 1});
  const Tensor b = arange(0, 4);
  const Tensor c = a + b;
  ASSERT_EQ(c.shape(), (Shape{3, 4}));
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 1, 2, 3, 4, 2, 3, 4, 5}));
  EXPECT_THROW(add(ones({2, 3}), ones({4})), ValueError);
}

TEST(TensorOps, PromotionFollowsPyTorch) {
  EXPECT_EQ(promote_types(DType::I64, DType::F32), DType::F32);
  EXPECT_EQ(promote_types(DType::F32, DType::F64), DType::F64);
  EXPECT_EQ(promote_types(DType::BOOL, DType::I64), DType::I64);
  EXPECT_EQ((arange(0, 3, 1, DType::I64) + 1).dtype(), DType::I64);
  EXPECT_EQ((arange(0, 3, 1, DType::I64) + 0.5).dtype(), DType::F32);
  EXPECT_EQ((arange(0, 3, 1, DType::I64) / 2).dtype(), DType::F32);
  EXPECT_EQ(lt(arange(0, 3), 1).dtype(), DType::BOOL);
}

TEST(TensorOps, ViewsShareBytesAndMatmulReadsTransposes) {
  Tensor a = arange(0, 6).reshape({2, 3});
  const Tensor t = a.T();
  EXPECT_FALSE(t.is_contiguous());
  const Tensor p = matmul(t, a);  // (3, 3)
  ASSERT_EQ(p.shape(), (Shape{3, 3}));
  EXPECT_FLOAT_EQ(p.select(0, 2).select(0, 2).item<float>(), 2 * 2 + 5 * 5);
  EXPECT_FLOAT_EQ(a.select(1, 2).select(0, 1).item<float>(), 5);
  EXPECT_THROW(a.select(2, 0), IndexError);
  EXPECT_THROW(matmul(ones({2, 3}), ones({2, 3})), ValueError);
}

TEST(TensorAutograd, GradientsOfAProductAndASum) {
  Tensor w = tensor({{1, 2}, {3, 4}}).requires_grad_();
  Tensor x = tensor({1, -1});
  const Tensor loss = sum(mul(matmul(w, x), matmul(w, x)));  // |W x|^2
  loss.backward();
  // d/dW |Wx|^2 = 2 (W x) x^T: W x = (-1, -1).
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{-2, 2, -2, 2}));
  EXPECT_FALSE(x.grad().defined());
}

TEST(TensorAutograd, GradientsAccumulateAndTheGraphIsFreed) {
  Tensor a = tensor({1, 2, 3}).requires_grad_();
  for (int i = 0; i < 2; ++i) (a * 2.0).sum().backward();
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{4, 4, 4}));
  const Tensor y = (a * a).sum();
  y.backward();
  EXPECT_THROW(y.backward(), ValueError);  // the saved values are gone
  const Tensor z = (a * a).sum();
  z.backward({}, true);
  EXPECT_NO_THROW(z.backward());
}

TEST(TensorAutograd, InPlaceChangeOfASavedTensorIsAnError) {
  Tensor a = tensor({1, 2, 3}).requires_grad_();
  Tensor b = tensor({4, 5, 6});
  const Tensor y = (a * b).sum();
  b.mul_(2.0);
  try {
    y.backward();
    FAIL() << "expected an error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("mul"), std::string::npos) << e.what();
  }
}

TEST(TensorAutograd, NonScalarBackwardNeedsAGradientAndNoGradRecordsNothing) {
  Tensor a = tensor({1, 2}).requires_grad_();
  EXPECT_THROW((a * 2.0).backward(), ValueError);
  {
    const autograd::NoGradGuard guard;
    EXPECT_FALSE((a * 2.0).requires_grad());
  }
  EXPECT_TRUE((a * 2.0).requires_grad());
  EXPECT_THROW(a.fill_(0.0), ValueError);  // a leaf that requires a gradient
}

TEST(TensorOps, CrossEntropyMatchesLogSoftmax) {
  const Tensor logits = tensor({{1, 2, 3}, {0, 0, 0}});
  const Tensor target = from_vector<std::int64_t>({2, -100}, {2});
  const double expected = -std::log(std::exp(3.0) / (std::exp(1.0) + std::exp(2.0) + std::exp(3.0)));
  EXPECT_NEAR(cross_entropy(logits, target).item<double>(), expected, 1e-6);
}

TEST(TensorDevice, CudaIsAClearErrorOnACpuBuild) {
  EXPECT_EQ(ones({1}).to("cpu").device(), Device::cpu());
  EXPECT_THROW(ones({1}).to("cuda"), Error);
  EXPECT_THROW(ones({1}).to("tpu"), ValueError);
}

TEST(TensorRandom, ManualSeedRepeatsTheStream) {
  manual_seed(7);
  const std::vector<float> first = randn({5}).to_vector<float>();
  manual_seed(7);
  EXPECT_EQ(randn({5}).to_vector<float>(), first);
}

// The README's example: d/dw mean((1 w)^2) = 2/8 * 1^T (1 w) for a (4, 3) matrix of ones.
TEST(TensorAutograd, ReadmeExampleGivesTheGradient) {
  kael::Tensor w = kael::randn({3, 2}).requires_grad_();
  kael::Tensor loss = kael::mean(kael::pow(kael::matmul(kael::ones({4, 3}), w), 2));
  loss.backward();
  const Tensor column_sums = sum(w.detach(), {0}, true);  // (1, 2): each row of ones @ w
  const Tensor expected = mul(column_sums.expand({3, 2}), 2.0 * 4 / 8);
  EXPECT_TRUE(allclose(w.grad(), expected, 1e-5, 1e-6)) << w.grad() << expected;
}

// docs/tensor.md's worked example: a two-layer MLP fitted to sin(x) with plain SGD.
TEST(TensorAutograd, TwoLayerMlpFitsACurveWithSgd) {
  manual_seed(0);
  const Tensor x = linspace(-3, 3, 64).reshape({64, 1});  // (64, 1)
  const Tensor y = kael::sin_reference(x);                 // (64, 1)
  Tensor w1 = mul(randn({1, 32}), 0.5).requires_grad_();   // (1, 32)
  Tensor b1 = zeros({32}).requires_grad_();
  Tensor w2 = mul(randn({32, 1}), 0.5).requires_grad_();   // (32, 1)
  Tensor b2 = zeros({1}).requires_grad_();
  double first = 0, last = 0;
  for (int step = 0; step < 2000; ++step) {
    const Tensor hidden = tanh(matmul(x, w1) + b1);          // (64, 32)
    const Tensor prediction = matmul(hidden, w2) + b2;        // (64, 1)
    const Tensor loss = mean(pow(prediction - y, 2));
    loss.backward();
    {
      const autograd::NoGradGuard no_grad;
      for (Tensor* p : {&w1, &b1, &w2, &b2}) {
        p->add_(p->grad(), -0.1);
        p->zero_grad();
      }
    }
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, first / 20) << first << " -> " << last;
}

}  // namespace
}  // namespace kael
