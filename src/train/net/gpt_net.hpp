// Internal to src/train: the model `kael train` and `kael finetune` run, nn::GPT on the tensor
// library with autograd, and what a run needs around it: each parameter's GPT-2 checkpoint name
// and layout (so checkpoints stay what transformers loads), the starting weights (transformers'
// initialization, seeded, or a checkpoint, matched and checked by the model layer), one
// micro-batch's forward and backward with the run's dropout streams, and the held-out loss.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kael/core/tensor.hpp"
#include "kael/model/gpt2.hpp"
#include "kael/nn/gpt.hpp"

namespace kael::train {

// One trainable tensor, as a checkpoint stores it and as nn::GPT holds it.
struct NetParameter {
  std::string name;           // Hugging Face's: "transformer.wte.weight", ..., "lm_head.weight" (untied only)
  Shape shape;                // as Hugging Face stores it: Conv1D weights (in, out)
  Tensor tensor;              // nn::GPT's parameter: Linear weights (out, in), so the transpose of shape
  bool transposed = false;    // tensor is shape transposed (the four Conv1D weights of each block)
  bool weight_decay = false;  // 2 dimensions: wte, wpe, lm_head and the four matrices of each block
};

// Where a micro-batch's dropout masks come from (kael/tensor/dropout_streams.hpp): stream
// `first_stream` + k for its k-th dropout, its rows numbered from first_row of the global batch.
struct DropoutDraw {
  std::uint64_t seed = 0;
  std::uint64_t first_stream = 0;
  std::int64_t first_row = 0;
};

class GptNet {
 public:
  // transformers' GPT-2 initialization, seeded: every matrix N(0, 0.02), the residual projections
  // (attn.c_proj, mlp.c_proj) N(0, 0.02 / sqrt(2 n_layer)), biases 0, LayerNorm weights 1; an
  // untied lm_head is drawn like wte. Deterministic, not torch's random stream (gpt_net_weights.cpp).
  static GptNet init(const model::Config& config, std::uint64_t seed, double dropout);
  // DIR/model.safetensors with DIR/config.json, matched, checked and converted to F32 as
  // model::GPT2::load does (same names, same errors).
  static GptNet load(const std::filesystem::path& dir, double dropout);

  // nn::gpt_config with the run's dropout: ValueError when the config is one nn::GPT cannot
  // express (an MLP width other than 4 * n_embd).
  static nn::GptConfig net_config(const model::Config& config, double dropout);

  const model::Config& config() const { return config_; }
  nn::GPT& net() { return *net_; }
  // In checkpoint order: wte, wpe, h.0 ... h.{L-1}, ln_f, then lm_head when untied.
  std::vector<NetParameter>& parameters() { return parameters_; }
  const std::vector<NetParameter>& parameters() const { return parameters_; }
  std::int64_t parameter_count() const;
  // Each parameter's values, in parameters() order (the ranks hash and send these).
  std::vector<std::span<float>> values();
  // What autograd keeps for one (B, T) micro-batch's backward, estimated from the saved tensors.
  std::int64_t activation_bytes(int B, int T) const;

  // Forward and backward on inputs and targets (B, T) token ids: ADDS loss_scale * d(mean
  // cross-entropy) / d(parameter) to every gradient, and returns the mean (unscaled). Training
  // mode, dropout drawn from `dropout`. IndexError on an id outside the vocabulary.
  float forward_backward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets, int B, int T,
                         float loss_scale, const DropoutDraw& dropout);
  // The mean loss only: eval mode, no dropout, no gradient.
  float evaluate(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets, int B, int T);

  // `hf` in Hugging Face's layout (shape) copied into `p`'s tensor.
  static void copy_in(const NetParameter& p, const float* hf, float* tensor_data);
  // `value` (p's tensor, its gradient or an AdamW moment of it, in nn::GPT's layout) as a
  // checkpoint stores p: the Conv1D weights transposed, as nn::gpt2_state_dict stores them; the
  // other parameters are the value itself, detached, with no copy.
  static Tensor stored(const NetParameter& p, const Tensor& value);

 private:
  GptNet(const model::Config& config, double dropout);

  model::Config config_;
  std::shared_ptr<nn::GPT> net_;
  std::vector<NetParameter> parameters_;
};

}  // namespace kael::train
