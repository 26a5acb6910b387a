// kael::nn's MultiheadAttention, TransformerEncoderLayer and TransformerEncoder through the C++
// API: parameter names, shapes and initialization as torch's, the layers' outputs against
// multi_head_attention_forward and the ops composed by hand, the masks' effect, gradients to
// every parameter, and the errors. The comparison with torch is
// tests/python/test_nn_transformer_vs_torch.py (the Python classes run this code).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kael/core/error.hpp"
#include "kael/nn/multi_head_attention.hpp"
#include "kael/nn/transformer.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"

namespace kael::nn {
namespace {

using Names = std::vector<std::string>;

Names parameter_names(const Module& module) {
  Names names;
  for (const auto& [name, tensor] : module.named_parameters()) names.push_back(name);
  return names;
}

bool close(const Tensor& a, const Tensor& b, double tol = 1e-5) {
  return a.shape() == b.shape() && allclose(a, b, tol, tol);
}

// The attention of one head spelled out: softmax(q k^T / sqrt(D) + bias) v, for (N, H, L, D) inputs.
Tensor attention_by_hand(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  Tensor scores = mul(matmul(q, k.transpose(2, 3)), scale);
  if (bias.defined()) scores = add(scores, bias);
  return matmul(softmax(scores, -1), v);
}

TEST(MultiheadAttention, ParametersAreTorchsNamesShapesAndInitialization) {
  manual_seed(1);
  MultiheadAttention mha(64, 4);
  EXPECT_EQ(parameter_names(mha), (Names{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"}));
  EXPECT_EQ(mha.in_proj_weight.shape(), (Shape{192, 64}));
  const double bound = std::sqrt(6.0 / (64 + 192));  // Xavier-uniform over (3E, E)
  EXPECT_LE(max(abs(mha.in_proj_weight)).item<float>(), bound);
  EXPECT_GT(max(abs(mha.in_proj_weight)).item<float>(), 0.9 * bound);
  EXPECT_EQ(max(abs(mha.in_proj_bias)).item<float>(), 0.0f);
  EXPECT_EQ(max(abs(mha.out_proj->bias)).item<float>(), 0.0f);
  EXPECT_LE(max(abs(mha.out_proj->weight)).item<float>(), 1.0 / 8);  // Linear's rule, 1/sqrt(64)
  EXPECT_GT(max(abs(mha.out_proj->weight)).item<float>(), 0.0f);

  MultiheadAttention separate({.embed_dim = 8, .num_heads = 2, .kdim = 5, .vdim = 3});
  EXPECT_EQ(parameter_names(separate), (Names{"q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias",
                                              "out_proj.weight", "out_proj.bias"}));
  EXPECT_EQ(separate.k_proj_weight.shape(), (Shape{8, 5}));
  EXPECT_EQ(separate.v_proj_weight.shape(), (Shape{8, 3}));
  EXPECT_FALSE(separate.in_proj_weight.defined());

  MultiheadAttention no_bias({.embed_dim = 6, .num_heads = 3, .bias = false});
  EXPECT_EQ(parameter_names(no_bias), (Names{"in_proj_weight", "out_proj.weight"}));
}

TEST(TransformerEncoder, ParameterNamesAndCountAreTorchs) {
  TransformerEncoderLayer layer({.d_model = 8, .nhead = 2, .dim_feedforward = 16});
  const Names layer_names{"self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
                          "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight",
                          "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"};
  EXPECT_EQ(parameter_names(layer), layer_names);
  std::int64_t count = 0;
  for (const Tensor& p : layer.parameters()) count += p.numel();
  EXPECT_EQ(count, 3 * 8 * 8 + 3 * 8 + 8 * 8 + 8 + 16 * 8 + 16 + 8 * 16 + 8 + 4 * 8);  // torch's 1,064

  TransformerEncoderLayer without_bias({.d_model = 8, .nhead = 2, .dim_feedforward = 16, .bias = false});
  EXPECT_EQ(parameter_names(without_bias), (Names{"self_attn.in_proj_weight", "self_attn.out_proj.weight",
                                                  "linear1.weight", "linear2.weight", "norm1.weight", "norm2.weight"}));

  TransformerEncoder encoder(layer, 2, std::make_shared<LayerNorm>(8));
  const Names names = parameter_names(encoder);
  ASSERT_EQ(names.size(), 2 * layer_names.size() + 2);
  EXPECT_EQ(names.front(), "layers.0.self_attn.in_proj_weight");
  EXPECT_EQ(names[layer_names.size()], "layers.1.self_attn.in_proj_weight");
  EXPECT_EQ(names.back(), "norm.bias");
}

TEST(MultiheadAttention, ShapesForEachLayout) {
  manual_seed(2);
  MultiheadAttention seq_first(12, 3);
  const Tensor x = randn({5, 2, 12}), memory = randn({7, 2, 12});
  const auto [out, weights] = seq_first.forward(x, memory, memory);
  EXPECT_EQ(out.shape(), (Shape{5, 2, 12}));
  EXPECT_EQ(weights.shape(), (Shape{2, 5, 7}));
  EXPECT_EQ(seq_first.forward(x, x, x, Tensor(), true, Tensor(), false).weights.shape(), (Shape{2, 3, 5, 5}));
  EXPECT_FALSE(seq_first.forward(x, x, x, Tensor(), false).weights.defined());

  MultiheadAttention batch_first({.embed_dim = 12, .num_heads = 3, .batch_first = true});
  const Tensor xb = randn({2, 5, 12});
  EXPECT_EQ(batch_first.forward(xb, xb, xb).output.shape(), (Shape{2, 5, 12}));
  const auto unbatched = seq_first.forward(randn({5, 12}), randn({4, 12}), randn({4, 12}));
  EXPECT_EQ(unbatched.output.shape(), (Shape{5, 12}));
  EXPECT_EQ(unbatched.weights.shape(), (Shape{5, 4}));
}

TEST(MultiheadAttention, LayerIsTheFunctionalAndTheFunctionalIsTheOpsByHand) {
  manual_seed(3);
  const std::int64_t E = 8, H = 2, L = 4, S = 6, N = 3, D = E / H;
  MultiheadAttention mha(E, H);
  {
    autograd::NoGradGuard no_grad;  // nonzero biases, so the test sees them used
    mha.in_proj_bias.copy_(randn({3 * E}));
    mha.out_proj->bias.copy_(randn({E}));
  }
  const Tensor query = randn({L, N, E}), key = randn({S, N, E}), value = randn({S, N, E});
  const Tensor attn_mask = randn({L, S});
  const Tensor padding = from_vector(std::vector<std::uint8_t>(N * S, 0), {N, S}).to(DType::BOOL);
  const auto layer = mha.forward(query, key, value, padding, true, attn_mask);
  const auto functional = functional::multi_head_attention_forward(
      query, key, value,
      {.embed_dim_to_check = E, .num_heads = H, .in_proj_weight = mha.in_proj_weight, .in_proj_bias = mha.in_proj_bias,
       .out_proj_weight = mha.out_proj->weight, .out_proj_bias = mha.out_proj->bias, .key_padding_mask = padding,
       .attn_mask = attn_mask});
  EXPECT_TRUE(close(layer.output, functional.output));
  EXPECT_TRUE(close(layer.weights, functional.weights));

  const auto w = chunk(mha.in_proj_weight, 3, 0);
  const auto b = chunk(mha.in_proj_bias, 3, 0);
  const auto heads = [&](const Tensor& x, int i, std::int64_t length) {
    return linear(x, w[static_cast<std::size_t>(i)], b[static_cast<std::size_t>(i)])
        .reshape({length, N, H, D})
        .permute({1, 2, 0, 3});
  };
  const Tensor attended = attention_by_hand(heads(query, 0, L), heads(key, 1, S), heads(value, 2, S), attn_mask);
  const Tensor by_hand = linear(attended.permute({2, 0, 1, 3}).reshape({L, N, E}), mha.out_proj->weight, mha.out_proj->bias);
  EXPECT_TRUE(close(layer.output, by_hand));
  // Without weights the attention runs as scaled_dot_product_attention: the same output.
  EXPECT_TRUE(close(mha.forward(query, key, value, padding, false, attn_mask).output, by_hand));
}

TEST(MultiheadAttention, SelfAttentionsOneProductEqualsThreeAndTheGradientsAgree) {
  manual_seed(4);
  MultiheadAttention mha(8, 2);
  const Tensor x0 = randn({5, 2, 8});
  Tensor x = x0.clone().requires_grad_();
  mha.forward(x, x, x).output.sum().backward();  // one tensor: one product
  const Tensor fused_grad = x.grad(), fused_weight_grad = mha.in_proj_weight.grad();
  mha.zero_grad();
  Tensor q = x0.clone().requires_grad_(), k = x0.clone().requires_grad_(), v = x0.clone().requires_grad_();
  const Tensor separate = mha.forward(q, k, v).output;
  EXPECT_TRUE(close(separate, mha.forward(x, x, x).output));
  separate.sum().backward();
  EXPECT_TRUE(close(add(add(q.grad(), k.grad()), v.grad()), fused_grad));
  EXPECT_TRUE(close(mha.in_proj_weight.grad(), fused_weight_grad));
}

TEST(MultiheadAttention, AMaskedKeyGetsZeroWeight) {
  manual_seed(5);
  const std::int64_t L = 3, S = 4, N = 2;
  MultiheadAttention mha(6, 2);
  const Tensor query = randn({L, N, 6}), memory = randn({S, N, 6});
  std::vector<std::uint8_t> pad(N * S, 0);
  pad[0 * S + 1] = 1;  // sequence 0 hides key 1
  const Tensor padding = from_vector(pad, {N, S}).to(DType::BOOL);
  const Tensor weights = mha.forward(query, memory, memory, padding, true, Tensor(), false).weights;  // (N, H, L, S)
  EXPECT_EQ(max(abs(weights.select(0, 0).select(2, 1))).item<float>(), 0.0f);
  EXPECT_GT(min(weights.select(0, 1).select(2, 1)).item<float>(), 0.0f);  // sequence 1 keeps it
  EXPECT_TRUE(close(weights.sum({-1}), ones({N, 2, L})));

  // A boolean attn_mask is the float mask of 0 and -inf: key 3 hidden from query row 0.
  std::vector<std::uint8_t> hidden(L * S, 0);
  hidden[3] = 1;
  const Tensor bool_mask = from_vector(hidden, {L, S}).to(DType::BOOL);
  const Tensor float_mask = masked_fill(zeros({L, S}), bool_mask, -std::numeric_limits<double>::infinity());
  const auto with_bool = mha.forward(query, memory, memory, Tensor(), true, bool_mask);
  const auto with_float = mha.forward(query, memory, memory, Tensor(), true, float_mask);
  EXPECT_TRUE(close(with_bool.output, with_float.output));
  EXPECT_EQ(max(abs(with_bool.weights.select(1, 0).select(1, 3))).item<float>(), 0.0f);
}

TEST(MultiheadAttention, ReturnedWeightsAreThoseAfterDropoutWhileTraining) {
  manual_seed(10);
  MultiheadAttention mha({.embed_dim = 8, .num_heads = 2, .dropout = 0.5});
  const Tensor x = randn({6, 2, 8});
  const Tensor dropped = mha.forward(x, x, x, Tensor(), true, Tensor(), false).weights;  // (N, H, L, S)
  EXPECT_EQ(min(dropped).item<float>(), 0.0f);  // torch returns the weights the values were multiplied by
  EXPECT_FALSE(close(dropped.sum({-1}), ones({2, 2, 6})));
  mha.eval();
  EXPECT_TRUE(close(mha.forward(x, x, x, Tensor(), true, Tensor(), false).weights.sum({-1}), ones({2, 2, 6})));
}

TEST(MultiheadAttention, CausalHintGivesTheMasksResult) {
  manual_seed(6);
  MultiheadAttention mha({.embed_dim = 8, .num_heads = 2, .batch_first = true});
  const Tensor x = randn({2, 5, 8}), mask = generate_square_subsequent_mask(5);
  const Tensor masked = mha.forward(x, x, x, Tensor(), false, mask).output;
  EXPECT_TRUE(close(mha.forward(x, x, x, Tensor(), false, mask, true, true).output, masked));
  EXPECT_TRUE(close(mha.forward(x, x, x, Tensor(), true, mask, true, true).output, masked));
}

TEST(TransformerEncoderLayer, ForwardIsTheBlocksComposedByHand) {
  manual_seed(7);
  for (const bool norm_first : {false, true}) {
    TransformerEncoderLayer layer({.d_model = 8, .nhead = 2, .dim_feedforward = 12, .dropout = 0.0,
                                   .activation = "gelu", .norm_first = norm_first});
    const Tensor x = randn({4, 3, 8}), mask = generate_square_subsequent_mask(4);
    const auto attention = [&](const Tensor& h) { return layer.self_attn->forward(h, h, h, Tensor(), false, mask).output; };
    const auto feed_forward = [&](const Tensor& h) { return layer.linear2->forward(gelu(layer.linear1->forward(h))); };
    Tensor expected;
    if (norm_first) {
      const Tensor h = add(x, attention(layer.norm1->forward(x)));
      expected = add(h, feed_forward(layer.norm2->forward(h)));
    } else {
      const Tensor h = layer.norm1->forward(add(x, attention(x)));
      expected = layer.norm2->forward(add(h, feed_forward(h)));
    }
    EXPECT_TRUE(close(layer.forward(x, mask), expected)) << "norm_first " << norm_first;
  }
}

TEST(TransformerEncoder, CopiesAreIndependentAndGradientsReachEveryParameter) {
  manual_seed(8);
  TransformerEncoderLayer layer({.d_model = 8, .nhead = 2, .dim_feedforward = 16, .dropout = 0.0, .batch_first = true});
  TransformerEncoder encoder(layer, 2, std::make_shared<LayerNorm>(8));
  EXPECT_TRUE(close(encoder.layers->operator[](1).linear1->weight, layer.linear1->weight, 0.0));
  {
    autograd::NoGradGuard no_grad;
    encoder.layers->operator[](1).linear1->weight.mul_(0.5);
  }
  EXPECT_FALSE(close(encoder.layers->operator[](0).linear1->weight, encoder.layers->operator[](1).linear1->weight));
  EXPECT_TRUE(close(encoder.layers->operator[](0).linear1->weight, layer.linear1->weight, 0.0));

  const Tensor x = randn({2, 5, 8}).requires_grad_();
  std::vector<std::uint8_t> pad(2 * 5, 0);
  pad[9] = 1;
  const Tensor padding = from_vector(pad, {2, 5}).to(DType::BOOL);
  const Tensor out = encoder.forward(x, generate_square_subsequent_mask(5), padding);
  EXPECT_EQ(out.shape(), (Shape{2, 5, 8}));
  mul(out, randn({2, 5, 8})).sum().backward();
  for (const auto& [name, p] : encoder.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_GT(max(abs(p.grad())).item<float>(), 0.0f) << name;
  }
  EXPECT_TRUE(x.grad().defined());

  // Separate key and value projections get gradients too.
  MultiheadAttention separate({.embed_dim = 8, .num_heads = 2, .kdim = 5, .vdim = 3});
  separate.forward(randn({4, 2, 8}), randn({6, 2, 5}), randn({6, 2, 3})).output.sum().backward();
  for (const auto& [name, p] : separate.named_parameters()) EXPECT_TRUE(p.grad().defined()) << name;
}

TEST(TransformerEncoder, DropoutFollowsTheModeAndTheCausalMaskIsDetected) {
  manual_seed(9);
  TransformerEncoderLayer layer({.d_model = 8, .nhead = 2, .dim_feedforward = 16, .dropout = 0.5});
  TransformerEncoder encoder(layer, 2);
  const Tensor x = randn({4, 2, 8});
  encoder.eval();
  EXPECT_TRUE(close(encoder.forward(x), encoder.forward(x), 0.0));
  encoder.train();
  EXPECT_FALSE(close(encoder.forward(x), encoder.forward(x)));

  const Tensor causal = generate_square_subsequent_mask(4);
  EXPECT_EQ(causal.at<float>({0, 1}), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(causal.at<float>({1, 1}), 0.0f);
  EXPECT_TRUE(detect_is_causal_mask(causal, std::nullopt, 4));
  EXPECT_TRUE(detect_is_causal_mask(gt(triu(ones({4, 4}), 1), 0.5), std::nullopt, 4));  // the boolean form
  EXPECT_FALSE(detect_is_causal_mask(causal, std::nullopt, 5));
  EXPECT_FALSE(detect_is_causal_mask(zeros({4, 4}), std::nullopt, 4));
  EXPECT_FALSE(detect_is_causal_mask(causal, false, 4));
  EXPECT_TRUE(detect_is_causal_mask(Tensor(), true, 4));
}

TEST(MultiheadAttention, BadOptionsAndInputsAreClearErrors) {
  EXPECT_THROW(MultiheadAttention(10, 3), ValueError);
  EXPECT_THROW(MultiheadAttention(0, 1), ValueError);
  EXPECT_THROW(MultiheadAttention({.embed_dim = 8, .num_heads = 2, .add_bias_kv = true}), ValueError);
  EXPECT_THROW(MultiheadAttention({.embed_dim = 8, .num_heads = 2, .add_zero_attn = true}), ValueError);
  EXPECT_THROW(MultiheadAttention({.embed_dim = 8, .num_heads = 2, .kdim = 0}), ValueError);
  EXPECT_THROW(TransformerEncoderLayer({.d_model = 8, .nhead = 2, .activation = "tanh"}), ValueError);

  MultiheadAttention mha(8, 2);
  const Tensor x = randn({3, 2, 8});
  const auto message = [&](auto call) {
    try {
      call();
    } catch (const ValueError& e) {
      return std::string(e.what());
    }
    return std::string("no ValueError");
  };
  EXPECT_NE(message([&] { mha.forward(x, x, x, Tensor(), true, Tensor(), true, true); }).find("Need attn_mask"),
            std::string::npos);
  EXPECT_NE(message([&] { mha.forward(x, x, x, Tensor(), true, zeros({2, 3})); }).find("attn_mask has shape"),
            std::string::npos);
  EXPECT_NE(message([&] { mha.forward(x, x, x, Tensor(), true, zeros({5, 3, 3})); }).find("attn_mask has shape"),
            std::string::npos);
  EXPECT_NE(message([&] { mha.forward(x, x, x, gt(zeros({3, 2}), 0.0)); }).find("key_padding_mask has shape"),
            std::string::npos);
  EXPECT_NE(message([&] { mha.forward(randn({3, 2, 7}), x, x); }).find("embedding dimension"), std::string::npos);
  EXPECT_NE(message([&] { mha.forward(randn({3, 8}), x, x); }).find("expected key and value"), std::string::npos);
  EXPECT_NE(message([&] { mha.forward(randn({8}), randn({8}), randn({8})); }).find("unbatched 2D or batched 3D"),
            std::string::npos);
  EXPECT_NE(message([&] { mha.forward(x, randn({4, 3, 8}), randn({4, 3, 8})); }).find("batch"), std::string::npos);
  EXPECT_NE(message([&] { mha.forward(x, randn({4, 2, 8}), randn({5, 2, 8})); }).find("length"), std::string::npos);
  EXPECT_NE(message([&] { mha.forward(x, randn({4, 2, 5}), randn({4, 2, 5})); }).find("embedding dimension"),
            std::string::npos);
  EXPECT_THROW(mha.forward(x, x, x, Tensor(), true, zeros({3, 3}, DType::I64)), TypeError);

  functional::MultiheadAttentionForwardOptions missing{.embed_dim_to_check = 8, .num_heads = 2};
  EXPECT_NE(message([&] { functional::multi_head_attention_forward(x, x, x, missing); }).find("in_proj_weight is required"),
            std::string::npos);
  missing.in_proj_weight = mha.in_proj_weight;
  missing.out_proj_weight = mha.out_proj->weight;
  missing.num_heads = 3;
  EXPECT_NE(message([&] { functional::multi_head_attention_forward(x, x, x, missing); }).find("not divisible"),
            std::string::npos);
}

}  // namespace
}  // namespace kael::nn
