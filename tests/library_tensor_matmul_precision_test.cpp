// set_float32_matmul_precision (kael/tensor/precision.hpp): the setting itself, "medium" against
// a reference that rounds both operands to BF16 (round to nearest even, core's conversion) and
// sums in double, for matmul and linear forward and backward on ragged shapes and views, on each
// kernel set with a BF16 product (the others skipped by name, saying what they lack); and
// "highest" / "high" giving kernels::gemm's bits, as before the setting existed.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kael/nn/layers.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "kael/tensor/precision.hpp"
#include "kernels/gemm.hpp"
#include "kernels/gemm_bf16.hpp"
#include "kernels_testing.hpp"
#include "tensor/strided.hpp"

namespace kael {
namespace {

using kernels::test_util::every_isa_and_threads;
using kernels::test_util::isa_threads_name;
using kernels::test_util::OnEveryIsa;

constexpr double kF32Unit = 1.0 / (1 << 24);  // F32's unit roundoff

// The setting is process-wide: every test leaves it at the default.
class MatmulPrecisionSetting : public ::testing::Test {
 protected:
  void TearDown() override { set_float32_matmul_precision("highest"); }
};

TEST_F(MatmulPrecisionSetting, DefaultsToHighestAndReturnsWhatWasSet) {
  EXPECT_EQ(get_float32_matmul_precision(), "highest");
  for (const char* p : {"medium", "high", "highest", "medium"}) {
    set_float32_matmul_precision(p);
    EXPECT_EQ(get_float32_matmul_precision(), p);
  }
}

TEST_F(MatmulPrecisionSetting, UnknownValueIsAValueErrorNamingTheThreeAndChangesNothing) {
  set_float32_matmul_precision("medium");
  for (const char* bad : {"", "low", "Medium", "bf16", "highest "}) {
    try {
      set_float32_matmul_precision(bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const ValueError& e) {
      const std::string message = e.what();
      for (const char* accepted : {"\"highest\"", "\"high\"", "\"medium\""})
        EXPECT_NE(message.find(accepted), std::string::npos) << message;
    }
    EXPECT_EQ(get_float32_matmul_precision(), "medium");
  }
}

class MatmulPrecision : public OnEveryIsa {
 protected:
  void TearDown() override {
    set_float32_matmul_precision("highest");
    OnEveryIsa::TearDown();
  }
  // Makes "medium" run BF16 products, or skips naming what this set or CPU lacks (the caller
  // returns when IsSkipped()).
  void use_bf16_or_skip() {
    std::string why;
    if (!kernels::gemm_bf16_available(&why)) GTEST_SKIP() << "no BF16 products on this set: " << why;
    set_float32_matmul_precision("medium");
  }
};

// t's values rounded to BF16 (nearest even), held in F64.
Tensor bf16_f64(const Tensor& t) { return t.detach().to(DType::BF16).to(DType::F64); }
Tensor f64(const Tensor& t) { return t.detach().to(DType::F64); }

// Expects |got - exact| <= 2 (terms + 1) u bound elementwise (u F32's unit roundoff): exact is
// the double-precision result on the rounded operands, bound the same expression on their
// absolute values, terms the F32 additions on the way to each output (the sum over k, and any
// sum over broadcast batches). (terms + 1) u bound is the worst case of F32 summation and of the
// result's rounding; twice it for the pairs that AVX512-BF16 adds before the accumulator.
void expect_f32_sum_of(const Tensor& got, const Tensor& exact, const Tensor& bound, std::int64_t terms,
                       const std::string& what) {
  ASSERT_EQ(got.shape(), exact.shape()) << what;
  ASSERT_EQ(got.dtype(), DType::F32) << what;
  const Tensor excess = sub(abs(sub(f64(got), exact)), mul(bound, 2.0 * static_cast<double>(terms + 1) * kF32Unit));
  EXPECT_LE(max(excess).item<double>(), 1e-30) << what << ": outside F32 summation of the BF16 operands' products";
}

// And that those rounded operands matter: got is further from the unrounded operands' product
// than F32 summation would be, so the BF16 path really ran.
void expect_not_f32(const Tensor& got, const Tensor& unrounded, const Tensor& bound, std::int64_t terms,
                    const std::string& what) {
  const Tensor excess = sub(abs(sub(f64(got), unrounded)), mul(bound, 2.0 * static_cast<double>(terms + 1) * kF32Unit));
  EXPECT_GT(max(excess).item<double>(), 0.0) << what << ": equal to an F32 product";
}

struct ProductCase {
  std::string name;
  Tensor a, b;  // F32, or views of F32 tensors
};

std::vector<ProductCase> product_cases() {
  manual_seed(29);
  std::vector<ProductCase> cases;
  cases.push_back({"37x45 @ 45x29", randn({37, 45}), randn({45, 29})});
  cases.push_back({"batched 3x1x17x65 @ 2x65x9", randn({3, 1, 17, 65}), randn({2, 65, 9})});
  cases.push_back({"(70x33)^T @ 70x19, read transposed", randn({70, 33}).transpose(0, 1), randn({70, 19})});
  cases.push_back({"every other column of 11x62 @ (13x31)^T", randn({11, 62}).slice(1, 0, 62, 2),
                   randn({13, 31}).transpose(0, 1)});
  cases.push_back({"2x5x33 @ 33x21, folded into one product", randn({2, 5, 33}), randn({33, 21})});
  cases.push_back({"one row 1x130 @ 130x7", randn({1, 130}), randn({130, 7})});
  cases.push_back({"13x33 @ vector 33", randn({13, 33}), randn({33})});
  cases.push_back({"bmm 4x9x96 @ 4x96x5", randn({4, 9, 96}), randn({4, 96, 5})});
  return cases;
}

// The number of (M, N) matrices in a shape of at least two dims.
std::int64_t matrices(const Shape& s) { return shape_numel(Shape(s.begin(), s.end() - 2)); }

TEST_P(MatmulPrecision, MediumMatmulAndItsGradientsAreBf16OperandsSummedInF32) {
  use_bf16_or_skip();
  if (IsSkipped()) return;
  for (const ProductCase& c : product_cases()) {
    Tensor a = c.a.detach().requires_grad_(), b = c.b.detach().requires_grad_();
    EXPECT_EQ(a.strides(), c.a.strides()) << c.name << ": the case no longer reads the view it names";
    const Tensor out = c.name.starts_with("bmm") ? bmm(a, b) : matmul(a, b);
    const Tensor g = randn(out.shape());
    out.backward(g);
    const std::int64_t K = a.shape().back();
    expect_f32_sum_of(out, matmul(bf16_f64(a), bf16_f64(b)), matmul(abs(bf16_f64(a)), abs(bf16_f64(b))), K,
                      c.name + " forward");
    expect_not_f32(out, matmul(f64(a), f64(b)), matmul(abs(f64(a)), abs(f64(b))), K, c.name + " forward");

    // The gradients' products as matmul's backward takes them (vectors as matrices, broadcast
    // batches summed), in double on the rounded operands.
    const Tensor a2 = a.dim() == 1 ? bf16_f64(a).unsqueeze(0) : bf16_f64(a);
    const Tensor b2 = b.dim() == 1 ? bf16_f64(b).unsqueeze(1) : bf16_f64(b);
    Tensor g2 = bf16_f64(g);
    if (a.dim() == 1) g2 = g2.unsqueeze(-2);
    if (b.dim() == 1) g2 = g2.unsqueeze(-1);
    const auto a_of = [&](const Tensor& t) { return tensor_detail::sum_to(t, a2.shape()).reshape(a.shape()); };
    const auto b_of = [&](const Tensor& t) { return tensor_detail::sum_to(t, b2.shape()).reshape(b.shape()); };
    const Tensor b2t = b2.transpose(-1, -2), a2t = a2.transpose(-1, -2);
    // Each gradient element sums N (for a) or M (for b) products per output matrix, then over
    // the output matrices that share it (or, for a batch folded into one product, all its rows
    // in one chain): at most (N + 1) * copies and 2 * rows F32 additions.
    const std::int64_t N = g2.shape().back();
    const std::int64_t copies_a = matrices(g2.shape()) / matrices(a2.shape());
    const std::int64_t rows_b = shape_numel(g2.shape()) / N / matrices(b2.shape());
    expect_f32_sum_of(a.grad(), a_of(matmul(g2, b2t)), a_of(matmul(abs(g2), abs(b2t))), (N + 1) * copies_a,
                      c.name + " gradient of a");
    expect_f32_sum_of(b.grad(), b_of(matmul(a2t, g2)), b_of(matmul(abs(a2t), abs(g2))), 2 * rows_b,
                      c.name + " gradient of b");
  }
}

TEST_P(MatmulPrecision, MediumLinearAndItsGradientsAreBf16OperandsSummedInF32) {
  use_bf16_or_skip();
  if (IsSkipped()) return;
  manual_seed(31);
  struct Case {
    std::string name;
    Tensor x, weight, bias;
  };
  const std::vector<Case> cases = {
      {"3x7x45, weight 29x45, bias", randn({3, 7, 45}), randn({29, 45}), randn({29})},
      {"21x80 transposed view, weight (80x33)^T", randn({80, 21}).transpose(0, 1), randn({80, 33}).transpose(0, 1),
       Tensor()},
      {"one row 1x100, weight 65x100, bias", randn({1, 100}), randn({65, 100}), randn({65})},
  };
  for (const Case& c : cases) {
    Tensor x = c.x.detach().requires_grad_(), w = c.weight.detach().requires_grad_();
    Tensor b = c.bias.defined() ? c.bias.detach().requires_grad_() : Tensor();
    const Tensor y = linear(x, w, b);
    const Tensor g = randn(y.shape());
    y.backward(g);
    const std::int64_t K = w.size(1), N = w.size(0), rows = x.numel() / K;
    Tensor exact = matmul(bf16_f64(x), bf16_f64(w).transpose(0, 1));
    if (b.defined()) exact = add(exact, f64(b));  // the bias is added in F32, not rounded
    Tensor bound = matmul(abs(bf16_f64(x)), abs(bf16_f64(w)).transpose(0, 1));
    if (b.defined()) bound = add(bound, abs(f64(b)));
    expect_f32_sum_of(y, exact, bound, K + 1, c.name + " forward");
    expect_not_f32(y, matmul(f64(x), f64(w).transpose(0, 1)), matmul(abs(f64(x)), abs(f64(w)).transpose(0, 1)), K + 1,
                   c.name + " forward");

    const Tensor g2 = bf16_f64(g).reshape({rows, N}), x2 = bf16_f64(x).reshape({rows, K});
    expect_f32_sum_of(x.grad(), matmul(g2, bf16_f64(w)).reshape(x.shape()),
                      matmul(abs(g2), abs(bf16_f64(w))).reshape(x.shape()), N, c.name + " gradient of x");
    expect_f32_sum_of(w.grad(), matmul(g2.transpose(0, 1), x2), matmul(abs(g2).transpose(0, 1), abs(x2)), rows,
                      c.name + " gradient of weight");
    if (b.defined()) {  // a sum of g, not a product: F32 and unrounded, as before
      const Tensor g_rows = f64(g).reshape({rows, N});
      expect_f32_sum_of(b.grad(), sum(g_rows, {0}), sum(abs(g_rows), {0}), rows, c.name + " gradient of bias");
    }
  }
}

TEST_P(MatmulPrecision, MediumReachesNnLinearInEvaluationToo) {
  use_bf16_or_skip();
  if (IsSkipped()) return;
  manual_seed(37);
  nn::Linear layer(45, 27);
  layer.eval();
  const Tensor x = randn({5, 45});
  const autograd::NoGradGuard no_grad;
  const std::vector<float> got = layer.forward(x).to_vector<float>();  // the packed inference path steps aside
  const std::vector<float> functional = linear(x, layer.weight, layer.bias).to_vector<float>();
  EXPECT_EQ(got, functional);
  set_float32_matmul_precision("highest");
  EXPECT_NE(layer.forward(x).to_vector<float>(), functional);
}

// "highest" and "high" run kernels::gemm as matmul and linear did before the setting existed:
// the same bits, also after "medium" was set and reset.
TEST_P(MatmulPrecision, HighestAndHighGiveTheF32GemmsBits) {
  manual_seed(41);
  const std::int64_t M = 37, K = 45, N = 29;
  const Tensor a = randn({M, K}), b = randn({K, N}), w = randn({N, K}), bias = randn({N});
  std::vector<float> product(static_cast<std::size_t>(M * N)), with_weight(product.size()), with_bias(product.size());
  kernels::gemm(product.data(), N, a.data<float>(), K, false, b.data<float>(), N, false, M, N, K);
  kernels::gemm(with_weight.data(), N, a.data<float>(), K, false, w.data<float>(), K, true, M, N, K);
  kernels::gemm(with_bias.data(), N, a.data<float>(), K, false, w.data<float>(), K, true, M, N, K, false,
                bias.data<float>());
  // "medium" set and left: F32 again. Where this set has no BF16 product, "medium" itself runs
  // as "highest" (the setting is a hint, as in torch).
  set_float32_matmul_precision("medium");
  std::vector<const char*> f32_precisions = {"highest", "high"};
  if (!kernels::gemm_bf16_available()) f32_precisions.push_back("medium");
  for (const char* p : f32_precisions) {
    set_float32_matmul_precision(p);
    const std::vector<float> got = matmul(a, b).to_vector<float>(), got_linear = linear(a, w).to_vector<float>(),
                             got_bias = linear(a, w, bias).to_vector<float>();
    EXPECT_EQ(std::memcmp(got.data(), product.data(), product.size() * sizeof(float)), 0) << p << " matmul";
    EXPECT_EQ(std::memcmp(got_linear.data(), with_weight.data(), with_weight.size() * sizeof(float)), 0)
        << p << " linear";
    EXPECT_EQ(std::memcmp(got_bias.data(), with_bias.data(), with_bias.size() * sizeof(float)), 0)
        << p << " linear with a bias";
  }
}

// F64 products never round to BF16.
TEST_P(MatmulPrecision, MediumLeavesF64Alone) {
  use_bf16_or_skip();
  if (IsSkipped()) return;
  manual_seed(43);
  const Tensor a = randn({9, 40}, DType::F64), b = randn({40, 11}, DType::F64);
  const std::vector<double> medium = matmul(a, b).to_vector<double>();
  set_float32_matmul_precision("highest");
  EXPECT_EQ(medium, matmul(a, b).to_vector<double>());
}

INSTANTIATE_TEST_SUITE_P(Sets, MatmulPrecision, every_isa_and_threads(), isa_threads_name);

}  // namespace
}  // namespace kael
