// The tensor library on every kernel set (and 1 or 3 threads), each skipped by name where this
// CPU or build lacks it: the ops that reach the kernel table (matmul and linear on its GEMM,
// causal scaled_dot_product_attention on its attention kernel, threaded elementwise ops and
// sums) and their gradients, on ragged sizes, against the same ops computed in F64, which run
// plain loops.
#include <gtest/gtest.h>

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
}

INSTANTIATE_TEST_SUITE_P(Sets, TensorOnEveryIsa, every_isa_and_threads(), isa_threads_name);

}  // namespace
}  // namespace kael
