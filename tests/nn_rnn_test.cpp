// kael::nn's RNN, LSTM and GRU through the C++ API: the fused cells against the same step
// composed of the elementwise ops (values and gradients), and the layers' parameters, shapes
// and states. The comparison with torch is tests/python/test_nn_rnn_vs_torch.py.
#include <gtest/gtest.h>

#include "kael/core/error.hpp"
#include "kael/nn/rnn.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "kael/tensor/rnn.hpp"

namespace kael::nn {
namespace {

Tensor leaf(const Tensor& t) { return t.detach().clone().requires_grad_(); }

bool close(const Tensor& a, const Tensor& b) { return allclose(a, b, 1e-5, 1e-5); }

TEST(RnnCells, FusedLstmMatchesTheComposedStep) {
  manual_seed(1);
  const Tensor gates0 = randn({3, 4 * 5}), c0 = randn({3, 5}), weights_h = randn({3, 5}), weights_c = randn({3, 5});
  Tensor gates = leaf(gates0), c = leaf(c0);
  const auto [h_fused, c_fused] = lstm_cell_fused(gates, c);
  sum(add(mul(h_fused, weights_h), mul(c_fused, weights_c))).backward();

  Tensor gates_ref = leaf(gates0), c_ref = leaf(c0);
  const auto parts = chunk(gates_ref, 4, 1);
  const Tensor c_next = add(mul(sigmoid(parts[1]), c_ref), mul(sigmoid(parts[0]), tanh(parts[2])));
  const Tensor h_next = mul(sigmoid(parts[3]), tanh(c_next));
  sum(add(mul(h_next, weights_h), mul(c_next, weights_c))).backward();

  EXPECT_TRUE(close(h_fused, h_next));
  EXPECT_TRUE(close(c_fused, c_next));
  EXPECT_TRUE(close(gates.grad(), gates_ref.grad()));
  EXPECT_TRUE(close(c.grad(), c_ref.grad()));
}

TEST(RnnCells, FusedGruMatchesTheComposedStep) {
  manual_seed(2);
  const Tensor gi0 = randn({2, 3 * 4}), gh0 = randn({2, 3 * 4}), h0 = randn({2, 4}), w = randn({2, 4});
  Tensor gi = leaf(gi0), gh = leaf(gh0), h = leaf(h0);
  sum(mul(gru_cell_fused(gi, gh, h), w)).backward();

  Tensor gi_ref = leaf(gi0), gh_ref = leaf(gh0), h_ref = leaf(h0);
  const auto i = chunk(gi_ref, 3, 1), g = chunk(gh_ref, 3, 1);
  const Tensor r = sigmoid(add(i[0], g[0])), z = sigmoid(add(i[1], g[1]));
  const Tensor n = tanh(add(i[2], mul(r, g[2])));
  const Tensor h_next = add(mul(sub(ones_like(z), z), n), mul(z, h_ref));
  sum(mul(h_next, w)).backward();

  EXPECT_TRUE(close(gru_cell_fused(gi0, gh0, h0), h_next));
  EXPECT_TRUE(close(gi.grad(), gi_ref.grad()));
  EXPECT_TRUE(close(gh.grad(), gh_ref.grad()));
  EXPECT_TRUE(close(h.grad(), h_ref.grad()));
}

TEST(RnnLayers, ParametersShapesAndStates) {
  manual_seed(3);
  LSTM lstm(3, 5, 2, true, true);
  std::vector<std::string> names;
  for (const auto& [name, tensor] : lstm.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                                             "weight_ih_l1", "weight_hh_l1", "bias_ih_l1", "bias_hh_l1"}));
  EXPECT_EQ(lstm.named_parameters()[4].tensor.shape(), (Shape{20, 5}));
  const RnnResult r = lstm.forward_state(randn({2, 7, 3}));  // batch first: (B, T, in)
  EXPECT_EQ(r.output.shape(), (Shape{2, 7, 5}));
  EXPECT_EQ(r.h_n.shape(), (Shape{2, 2, 5}));
  EXPECT_EQ(r.c_n.shape(), (Shape{2, 2, 5}));
  // The last output of the last layer is that layer's final h.
  EXPECT_TRUE(close(r.output.select(1, 6), r.h_n.select(0, 1)));

  GRU gru(4, 3, 1, false);
  EXPECT_EQ(gru.parameters().size(), 2u);
  EXPECT_EQ(gru.forward(randn({6, 4})).shape(), (Shape{6, 3}));  // unbatched
  RNN relu_rnn(2, 3, 1, "relu");
  EXPECT_GE(min(relu_rnn.forward(randn({4, 1, 2}))).item<float>(), 0.0f);
  EXPECT_THROW(RNN(2, 3, 1, "sigmoid"), ValueError);
  EXPECT_THROW(lstm.forward(randn({2, 7, 4})), ValueError);
}

}  // namespace
}  // namespace kael::nn
