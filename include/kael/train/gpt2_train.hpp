// Training GPT-2 on the CPU: F32 master parameters with their gradients, a forward pass that
// keeps what the backward pass needs, the backward pass, and the global gradient norm.
//
// The parameters are held in Hugging Face's layout and names (Conv1D weights (in, out),
// "transformer.h.0.attn.c_attn.weight", ...), so a checkpoint is written by saving each
// parameter's data under its name, and torch's gradients compare one to one.
//
// Use: build the model (init or load), reserve(B, T) once, then per optimizer step
//   zero_grad(); for k < K: loss += forward_backward(inputs_k, targets_k, B, T, 1.0f / K);
//   clip_grad_norm(max_norm); adamw.step(model.parameters(), lr);
// or, saving a pass over the gradients, with the clipping folded into the update:
//   norm = grad_norm(); adamw.step(model.parameters(), lr, clip_coefficient(norm, max_norm));
// Everything runs on kael's threads (model::set_num_threads); results do not depend on the
// thread count.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "kael/core/tensor.hpp"
#include "kael/model/gpt2.hpp"

namespace kael::train {

// The arithmetic of the matrix products: the four of each block and the output head's, forward
// and backward (attention's small per-head products stay F32). bf16 is mixed precision as
// torch.autocast("cpu", dtype=torch.bfloat16) runs a product: operands rounded to BF16, sums
// in F32. The parameters, gradients, optimizer, loss and every other operation are F32 in both.
enum class Precision { f32, bf16 };
// "f32" or "bf16"; ValueError otherwise.
Precision parse_precision(std::string_view name);
const char* precision_name(Precision precision);
// ValueError, saying what is missing, unless `precision` can run on this CPU and kernel set (bf16
// needs AMX-BF16 or AVX512-BF16).
void require_precision(Precision precision);

// A target equal to this is skipped, like torch's cross_entropy(ignore_index=-100) with -1:
// it adds nothing to the loss and does not count in its mean.
inline constexpr std::int32_t kIgnoreTarget = -1;

// One trainable tensor. data and grad point into memory the model owns, contiguous and
// row-major in `shape`, valid as long as the model lives (they do not move on reserve()).
struct Parameter {
  std::string name;        // Hugging Face's: "transformer.wte.weight", ..., "lm_head.weight" (untied only)
  Shape shape;             // as Hugging Face stores it: Conv1D weights (in, out), wte (vocab, C)
  std::int64_t numel = 0;  // product of shape
  float* data = nullptr;   // F32 master values
  float* grad = nullptr;   // accumulated d(loss)/d(data), same layout
  bool weight_decay = false;  // 2+ dimensions (wte, wpe, the four matrices of each block)
};

// GPT-2's three dropouts (attn_pdrop on the attention probabilities, resid_pdrop after each
// projection, embd_pdrop after the embeddings) all use `probability`; 0 turns them off. The
// mask of every element is a pure function of (seed, the call counter, the site, the index),
// so it does not depend on the thread count, and a run restored with set_dropout_counter()
// draws the same masks as one never interrupted.
struct DropoutOptions {
  float probability = 0.0f;
  std::uint64_t seed = 0;
};

// Where the CPU time of forward_backward and clip_grad_norm went, in milliseconds of the
// process's CPU time (all threads, so the figures hold on a machine shared with other work),
// summed over the calls made while the model points at it (set_profile). matmul: the four
// products of each block (forward; backward: dX, dW and bias in one call); head: the output
// projection fused with cross-entropy, forward and backward (dX and dW); other: layer_norm,
// GELU, embeddings, residual adds, dropout. Profiling costs two clock reads per part and layer.
struct TrainProfile {
  double forward_matmul_ms = 0;
  double forward_attention_ms = 0;
  double forward_other_ms = 0;
  double head_ms = 0;
  double backward_matmul_ms = 0;  // both products of each linear layer's backward (dX and dW)
  double backward_attention_ms = 0;
  double backward_other_ms = 0;
  double grad_norm_ms = 0;
  double total_ms = 0;  // all of forward_backward and clip_grad_norm
};

class TrainableGPT2 {
 public:
  // A fresh GPT-2 initialized as transformers initializes GPT2LMHeadModel: every weight
  // N(0, 0.02), the residual projections (attn.c_proj.weight, mlp.c_proj.weight) N(0, 0.02 /
  // sqrt(2 * n_layer)), biases 0, LayerNorm weight 1 and bias 0; an untied lm_head is drawn
  // like wte. Seeded and deterministic (not torch's random stream). ValueError on a bad config.
  static TrainableGPT2 init(const model::Config& config, std::uint64_t seed);
  // DIR/model.safetensors with DIR/config.json (if present), matched, checked and converted to
  // F32 as model::GPT2::load does (same names, same errors). Nothing is kept from a failed load.
  static TrainableGPT2 load(const std::filesystem::path& dir);
  // The same from tensors in memory, named as in a checkpoint; `source` names them in messages.
  static TrainableGPT2 from_tensors(const model::Config& config, std::map<std::string, Tensor> tensors,
                                    std::string_view source = "checkpoint");

  TrainableGPT2(TrainableGPT2&&) noexcept;
  TrainableGPT2& operator=(TrainableGPT2&&) noexcept;
  ~TrainableGPT2();

  const model::Config& config() const;
  // In checkpoint order: wte, wpe, h.0 ... h.{L-1}, ln_f, then lm_head when untied. A tied wte
  // is one parameter (its gradient holds both the embedding's and the head's part).
  std::span<Parameter> parameters();
  std::span<const Parameter> parameters() const;
  std::int64_t parameter_count() const;  // sum of numel: 124,439,808 for GPT-2 small

  // Allocates the activations and scratch for micro-batches of B sequences of T tokens, once;
  // later calls with a B x T that fits reuse them. ValueError unless 1 <= T <= n_positions and
  // B >= 1. Bytes it holds: activation_bytes(B, T).
  void reserve(int B, int T);
  std::int64_t activation_bytes(int B, int T) const;

  // Forward and backward on inputs (B, T) and targets (B, T), row-major token ids (targets[b, t]
  // is the token after inputs[b, t]; kIgnoreTarget skips it). ADDS loss_scale * d(mean loss)
  // / d(parameter) to every grad, so K micro-batches with loss_scale = 1 / K accumulate the
  // gradient of the mean over all of them. Returns the mean cross-entropy over the counted
  // targets of this call (unscaled; 0 when none counts). Applies dropout (set_dropout) and
  // advances the dropout counter by one. Reserves (B, T) if needed. ValueError on sizes beyond
  // n_positions, IndexError on an input id outside the vocabulary or a target that is neither
  // one nor kIgnoreTarget; nothing changes when it throws.
  float forward_backward(const std::int32_t* inputs, const std::int32_t* targets, int B, int T, float loss_scale);
  // The mean loss only, without dropout and without touching the gradients.
  float evaluate(const std::int32_t* inputs, const std::int32_t* targets, int B, int T);

  void zero_grad();

  void set_dropout(const DropoutOptions& options);
  const DropoutOptions& dropout() const;
  // forward_backward calls made so far (the dropout stream's position), for saving and resuming.
  std::uint64_t dropout_counter() const;
  void set_dropout_counter(std::uint64_t counter);

  // The L2 norm of all gradients together (a tied wte once), accumulated in double.
  double grad_norm() const;
  // torch.nn.utils.clip_grad_norm_: with norm = grad_norm(), multiplies every gradient by
  // max_norm / (norm + 1e-6) when that is below 1. Returns the norm before clipping.
  // max_norm <= 0 only returns the norm.
  double clip_grad_norm(double max_norm);
  // The factor clip_grad_norm multiplies the gradients by (1 when it leaves them as they are).
  static float clip_coefficient(double norm, double max_norm);

  // The precision of later calls (default f32). ValueError as require_precision().
  void set_precision(Precision precision);
  Precision precision() const;

  // Adds the time of later calls to *profile (null: stop). The profile must outlive its use.
  void set_profile(TrainProfile* profile);

  // Data parallelism: the rows of later calls are rows first_row ... of a larger batch split
  // over processes, so dropout draws the masks of those rows and B processes x rows agree with
  // one call on the whole batch. Default 0. ValueError when negative.
  void set_first_row(std::int64_t row);
  std::int64_t first_row() const;
  // Called during forward_backward each time the backward pass has finished a group of
  // gradients (ln_f and an untied head, then each block from the last, then wte and wpe; wte
  // first of all with set_keep_embedding_rows), with
  // that group's part of flat_gradients(): no later part of the call writes it. For overlapping
  // a gradient all-reduce with the rest of the backward. Empty: no calls.
  using GradientsReady = std::function<void(std::span<float> gradients)>;
  void set_gradients_ready(GradientsReady hook);
  // With keep on, later calls leave their own embedding rows out of wte's gradient, which is then
  // complete (the head's part and earlier calls') and handed over before the blocks' backward,
  // and keep them: kept_embedding_rows() is (B*T, C), row i the gradient of input i's embedding,
  // valid until the next call. add_embedding_rows(inputs, rows (inputs.size(), C)) adds such rows
  // to wte's gradient in order (a data-parallel step adds every rank's, rank by rank, after the
  // sum). ValueError / IndexError on sizes or ids that do not fit.
  void set_keep_embedding_rows(bool keep);
  std::span<const float> kept_embedding_rows() const;
  void add_embedding_rows(std::span<const std::int32_t> inputs, std::span<const float> rows);
  // Every parameter's values and gradients as one buffer each, in parameters() order
  // (parameter_count() floats; each Parameter's data and grad point into them).
  std::span<float> flat_values();
  std::span<float> flat_gradients();

  struct Impl;

 private:
  explicit TrainableGPT2(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kael::train
