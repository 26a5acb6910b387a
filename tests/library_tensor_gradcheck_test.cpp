// Every differentiable op's backward against central finite differences in F64, on broadcast
// shapes and non-contiguous (transposed, sliced, expanded) inputs of ragged sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"

namespace kael {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// Compares d(sum(f(inputs) * weights))/d(input) with central differences for each input.
void check_gradients(const std::string& name, const Fn& f, std::vector<Tensor> inputs) {
  for (Tensor& t : inputs) t.requires_grad_();
  const Tensor probe = f(inputs);
  manual_seed(99);
  const Tensor weights = randn(probe.shape(), DType::F64);  // a random direction, so no gradient hides in a sum
  const Tensor loss = sum(mul(probe, weights));
  loss.backward();
  const double h = 1e-6;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    Tensor base = inputs[k].detach().contiguous().clone();
    const Tensor grad = inputs[k].grad();
    ASSERT_TRUE(grad.defined()) << name << " input " << k;
    ASSERT_EQ(grad.shape(), base.shape()) << name;
    double largest = 1e-12;
    for (std::int64_t i = 0; i < base.numel(); ++i) largest = std::max(largest, std::abs(grad.value_as_double(i)));
    for (std::int64_t i = 0; i < base.numel(); ++i) {
      auto value_at = [&](double delta) {
        std::vector<Tensor> moved;
        for (std::size_t j = 0; j < inputs.size(); ++j) moved.push_back(inputs[j].detach());
        Tensor changed = base.clone();
        double* p = changed.data<double>();
        p[i] += delta;
        moved[k] = changed;
        const autograd::NoGradGuard no_grad;
        return sum(mul(f(moved), weights)).item<double>();
      };
      const double numeric = (value_at(h) - value_at(-h)) / (2 * h);
      EXPECT_NEAR(grad.value_as_double(i), numeric, 1e-5 * largest + 1e-7) << name << " input " << k << " element " << i;
    }
  }
}

Tensor r(Shape shape) { return randn(std::move(shape), DType::F64); }
Tensor positive(Shape shape) { return add(rand(std::move(shape), DType::F64), 0.5); }

TEST(TensorGradcheck, ElementwiseWithBroadcasting) {
  manual_seed(1);
  check_gradients("add", [](auto& v) { return add(v[0], v[1], 2.5); }, {r({3, 5}), r({5})});
  check_gradients("sub", [](auto& v) { return v[0] - v[1]; }, {r({3, 1}), r({1, 7})});
  check_gradients("mul", [](auto& v) { return v[0] * v[1]; }, {r({2, 3, 4}), r({3, 1})});
  check_gradients("div", [](auto& v) { return v[0] / v[1]; }, {r({4, 3}), positive({3})});
  check_gradients("pow scalar", [](auto& v) { return pow(v[0], 3); }, {r({5, 3})});
  check_gradients("pow tensor", [](auto& v) { return pow(v[0], v[1]); }, {positive({3, 2}), r({2})});
  check_gradients("maximum", [](auto& v) { return maximum(v[0], v[1]); }, {r({3, 4}), r({4})});
  check_gradients("where", [](auto& v) { return where(gt(v[0], 0), v[0], v[1]); }, {r({3, 5}), r({5})});
}

TEST(TensorGradcheck, UnaryFunctions) {
  manual_seed(2);
  const std::vector<std::pair<std::string, Fn>> fns = {
      {"neg", [](auto& v) { return neg(v[0]); }},
      {"exp", [](auto& v) { return exp(v[0]); }},
      {"tanh", [](auto& v) { return tanh(v[0]); }},
      {"sigmoid", [](auto& v) { return sigmoid(v[0]); }},
      {"relu", [](auto& v) { return relu(v[0]); }},
      {"abs", [](auto& v) { return abs(v[0]); }},
      {"gelu", [](auto& v) { return gelu(v[0]); }},
      {"gelu tanh", [](auto& v) { return gelu(v[0], "tanh"); }},
  };
  for (const auto& [name, f] : fns) check_gradients(name, f, {r({7, 3}).T()});  // transposed input
  check_gradients("log", [](auto& v) { return log(v[0]); }, {positive({4, 5})});
  check_gradients("sqrt", [](auto& v) { return sqrt(v[0]); }, {positive({4, 5})});
  check_gradients("rsqrt", [](auto& v) { return rsqrt(v[0]); }, {positive({4, 5})});
}

TEST(TensorGradcheck, ReductionsViewsAndProducts) {
  manual_seed(3);
  check_gradients("sum dim", [](auto& v) { return sum(v[0], {1}, true); }, {r({3, 5, 2})});
  check_gradients("mean", [](auto& v) { return mean(v[0], {0, 2}); }, {r({3, 5, 2})});
  check_gradients("var", [](auto& v) { return var(v[0], {-1}); }, {r({4, 6})});
  check_gradients("max dim", [](auto& v) { return max(v[0], 1).first; }, {r({4, 7})});
  check_gradients("permute", [](auto& v) { return v[0].permute({2, 0, 1}) * 3.0; }, {r({2, 3, 4})});
  check_gradients("slice", [](auto& v) { return v[0].slice(1, 1, 6, 2) * v[0].select(0, 1).slice(0, 0, 3); }, {r({3, 7})});
  check_gradients("expand", [](auto& v) { return v[0].expand({4, 3, 5}) * 2.0; }, {r({3, 1})});
  check_gradients("reshape", [](auto& v) { return v[0].T().reshape({-1}); }, {r({3, 4})});
  check_gradients("matmul 2-D", [](auto& v) { return matmul(v[0], v[1]); }, {r({5, 7}), r({7, 3})});
  check_gradients("matmul batched", [](auto& v) { return matmul(v[0], v[1]); }, {r({2, 1, 3, 4}), r({3, 4, 5})});
  check_gradients("matmul vector", [](auto& v) { return matmul(v[0], v[1]); }, {r({4}), r({3, 4, 2})});
  check_gradients("linear", [](auto& v) { return linear(v[0], v[1], v[2]); }, {r({2, 5, 3}), r({4, 3}), r({4})});
  check_gradients("cat", [](auto& v) { return cat({v[0], v[1]}, 1); }, {r({2, 3}), r({2, 4})});
  check_gradients("stack", [](auto& v) { return stack({v[0], v[1]}, 0); }, {r({2, 3}), r({2, 3})});
  check_gradients("index_select", [](auto& v) { return index_select(v[0], 0, from_vector<std::int64_t>({2, 0, 2}, {3})); },
                  {r({4, 3})});
}

TEST(TensorGradcheck, NetworkFunctions) {
  manual_seed(4);
  check_gradients("softmax", [](auto& v) { return softmax(v[0], -1); }, {r({3, 6})});
  check_gradients("log_softmax", [](auto& v) { return log_softmax(v[0], 0); }, {r({5, 2})});
  check_gradients("layer_norm", [](auto& v) { return layer_norm(v[0], {6}, v[1], v[2]); }, {r({3, 6}), r({6}), r({6})});
  check_gradients("embedding", [](auto& v) { return embedding(from_vector<std::int64_t>({1, 3, 1, 0}, {2, 2}), v[0]); },
                  {r({5, 3})});
  check_gradients("cross_entropy",
                  [](auto& v) { return cross_entropy(v[0], from_vector<std::int64_t>({2, -100, 0, 4}, {4})); }, {r({4, 5})});
}

TEST(TensorGradcheck, ScaledDotProductAttention) {
  manual_seed(5);
  const auto sdpa = [](bool causal, Tensor mask = Tensor(), std::optional<double> scale = std::nullopt) {
    return [=](auto& v) { return scaled_dot_product_attention(v[0], v[1], v[2], causal, mask, scale); };
  };
  check_gradients("sdpa", sdpa(false), {r({2, 7, 13}), r({2, 5, 13}), r({2, 5, 4})});
  check_gradients("sdpa causal", sdpa(true), {r({2, 7, 13}), r({2, 7, 13}), r({2, 7, 13})});
  check_gradients("sdpa causal L != S", sdpa(true), {r({7, 6}), r({5, 6}), r({5, 3})});
  // BOOL mask broadcast over the batch, its row 2 hidden entirely (that row's output is 0).
  Tensor keep = gt(rand({7, 5}, DType::F64), 0.3);
  keep.select(0, 2).fill_(0.0);
  check_gradients("sdpa bool mask", sdpa(false, keep), {r({2, 7, 6}), r({2, 5, 6}), r({2, 5, 4})});
  // A float mask added to the scores, a given scale, and batch dims that broadcast; transposed q.
  check_gradients("sdpa float mask", sdpa(false, r({1, 7, 5}), 0.3),
                  {r({2, 1, 6, 7}).transpose(-1, -2), r({3, 5, 6}), r({3, 5, 4})});
}

}  // namespace
}  // namespace kael
