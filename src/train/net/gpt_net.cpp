#include "train/net/gpt_net.hpp"

#include <algorithm>
#include <map>

#include "kael/core/error.hpp"
#include "kael/nn/gpt2_config.hpp"
#include "kael/nn/gpt2_weights.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/dropout_streams.hpp"
#include "kael/tensor/ops.hpp"
#include "model/weight_names.hpp"

namespace kael::train {

namespace {

// (B, T) int32 ids as the I64 tensor nn::GPT and cross_entropy take.
Tensor ids_tensor(std::span<const std::int32_t> ids, int B, int T) {
  if (ids.size() != static_cast<std::size_t>(B) * static_cast<std::size_t>(T))
    throw ValueError(str("GptNet: ", ids.size(), " ids given for a (", B, ", ", T, ") batch"));
  Tensor out = Tensor::empty(DType::I64, {B, T});
  std::copy(ids.begin(), ids.end(), out.data<std::int64_t>());
  return out;
}

// The mean cross-entropy of logits (B, T, V) against targets (B, T).
Tensor mean_loss(const Tensor& logits, const Tensor& targets) {
  const std::int64_t V = logits.shape().back();
  return cross_entropy(logits.reshape({-1, V}), targets.reshape({-1}));
}

// dst (cols, rows) = src (rows, cols) transposed, in 32 x 32 tiles: a flat buffer into a
// parameter's storage (the other way, stored() uses the tensor library's transpose).
void transpose_into(float* dst, const float* src, std::int64_t rows, std::int64_t cols) {
  constexpr std::int64_t kTile = 32;
  for (std::int64_t r0 = 0; r0 < rows; r0 += kTile)
    for (std::int64_t c0 = 0; c0 < cols; c0 += kTile)
      for (std::int64_t r = r0; r < std::min(rows, r0 + kTile); ++r)
        for (std::int64_t c = c0; c < std::min(cols, c0 + kTile); ++c) dst[c * rows + r] = src[r * cols + c];
}

}  // namespace

nn::GptConfig GptNet::net_config(const model::Config& config, double dropout) {
  config.validate();
  nn::GptConfig c = nn::gpt_config(config);  // the one conversion (refuses an MLP width other than 4 * n_embd)
  c.dropout = dropout;
  return c;
}

GptNet::GptNet(const model::Config& config, double dropout)
    : config_(config), net_(std::make_shared<nn::GPT>(net_config(config, dropout))) {
  std::map<std::string, Tensor> by_name;
  for (const auto& [name, tensor] : net_->named_parameters()) by_name.emplace(name, tensor);
  // The checkpoint's names and shapes, in its order (the model layer's table).
  for (const model::ParameterSpec& spec : model::parameter_specs(config)) {
    NetParameter p;
    // Hugging Face's name as GPT2LMHeadModel's state_dict spells it.
    p.name = spec.name == model::kHeadName ? spec.name : std::string(model::kTransformerPrefix) + spec.name;
    p.shape = spec.shape;
    const std::string ours = nn::translated_gpt2_name(p.name);
    const auto found = by_name.find(ours);
    if (found == by_name.end()) throw Error(str("GptNet: nn::GPT has no parameter ", ours, " for ", spec.name));
    p.tensor = found->second;
    p.transposed = nn::stored_transposed(ours);
    p.weight_decay = spec.shape.size() >= 2;
    by_name.erase(found);
    parameters_.push_back(std::move(p));
  }
  if (!by_name.empty()) throw Error(str("GptNet: nn::GPT's parameter ", by_name.begin()->first, " has no GPT-2 name"));
}

void GptNet::copy_in(const NetParameter& p, const float* hf, float* data) {
  if (p.transposed)
    transpose_into(data, hf, p.shape[0], p.shape[1]);  // hf (rows, cols) -> data (cols, rows)
  else
    std::copy_n(hf, shape_numel(p.shape), data);
}

Tensor GptNet::stored(const NetParameter& p, const Tensor& value) {
  const Tensor v = value.detach();
  return p.transposed ? v.T().contiguous() : v;
}

std::int64_t GptNet::parameter_count() const {
  std::int64_t n = 0;
  for (const NetParameter& p : parameters_) n += shape_numel(p.shape);
  return n;
}

std::vector<std::span<float>> GptNet::values() {
  std::vector<std::span<float>> out;
  for (NetParameter& p : parameters_)
    out.emplace_back(p.tensor.data<float>(), static_cast<std::size_t>(p.tensor.numel()));
  return out;
}

std::int64_t GptNet::activation_bytes(int B, int T) const {
  // Per token: about 16 n_embd floats a block keeps (layer norms, qkv, attention output, the
  // MLP's 4 n_embd twice, residuals) and its attention probabilities (n_head T), then the
  // logits and their gradient.
  const std::int64_t C = config_.n_embd, tokens = std::int64_t{B} * T;
  const std::int64_t per_token = config_.n_layer * (16 * C + std::int64_t{config_.n_head} * T) +
                                 2 * std::int64_t{config_.vocab_size} + 2 * C;
  return 4 * tokens * per_token;
}

float GptNet::forward_backward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets, int B,
                               int T, float loss_scale, const DropoutDraw& dropout) {
  const Tensor ids = ids_tensor(inputs, B, T), next = ids_tensor(targets, B, T);
  net_->train();
  Tensor loss;
  {
    // The masks: one stream per dropout in the forward's order (embeddings, then per block the
    // attention probabilities, the attention projection, the MLP), rows numbered globally.
    const DropoutStreams streams(dropout.seed, dropout.first_stream, dropout.first_row);
    loss = mean_loss(net_->forward(ids), next);  // logits (B, T, V)
  }
  const float value = loss.item<float>();
  loss.backward(full({}, static_cast<double>(loss_scale)));
  return value;
}

float GptNet::evaluate(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets, int B, int T) {
  const Tensor ids = ids_tensor(inputs, B, T), next = ids_tensor(targets, B, T);
  const autograd::NoGradGuard no_grad;
  net_->eval();
  const float value = mean_loss(net_->forward(ids), next).item<float>();
  net_->train();
  return value;
}

}  // namespace kael::train
