// TrainableGPT2: checks a call's arguments, then runs the forward pass (keeping its
// activations), the fused head and loss, and the backward pass through every block.
#include "kael/train/gpt2_train.hpp"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <vector>

#include "kael/core/error.hpp"
#include "kael/io/safetensors.hpp"
#include "kernels/attention_train.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/embedding.hpp"
#include "kernels/linear_train.hpp"
#include "kernels/infra/thread_pool.hpp"
#include "kernels/norm.hpp"
#include "kernels/training.hpp"
#include "train/model/activations.hpp"
#include "train/model/parameters.hpp"
#include "train/model/random.hpp"
#include "train/model/profile.hpp"

namespace kael::train {

namespace {

// Dropout sites of one forward pass: the embeddings, then per block the attention
// probabilities, the attention projection and the MLP projection.
constexpr std::uint64_t kSitesPerCall = 1 << 16;
std::uint64_t embedding_site() { return 0; }
std::uint64_t attention_site(int layer) { return 1 + 3 * static_cast<std::uint64_t>(layer); }
std::uint64_t attn_resid_site(int layer) { return 2 + 3 * static_cast<std::uint64_t>(layer); }
std::uint64_t mlp_resid_site(int layer) { return 3 + 3 * static_cast<std::uint64_t>(layer); }

}  // namespace

struct TrainableGPT2::Impl {
  model::Config config;
  ParameterSet params;
  std::vector<float> arena;  // the activations, grown to the largest B x T seen
  Activations acts;
  DropoutOptions dropout;
  std::uint64_t counter = 0;
  TrainProfile* profile = nullptr;
  Precision precision = Precision::f32;
  std::int64_t first_row = 0;  // of this process's rows in the global batch (set_first_row)
  GradientsReady gradients_ready;
  bool keep_embedding_rows = false;
  std::span<const float> kept_rows;  // (B*T, C) of the last call, when kept

  // The mask of one site; each of the batch's rows holds row_elements of the site's elements.
  DropoutMask mask(bool train, std::uint64_t site, std::int64_t row_elements) const {
    if (!train || dropout.probability <= 0.0f) return {};
    return {dropout.probability, dropout.seed, counter * kSitesPerCall + site,
            static_cast<std::uint64_t>(first_row * row_elements)};
  }
  // Tells the hook that the gradients of the parameters named `prefix`... are complete for this
  // call; they are consecutive in the flat buffer (checkpoint order).
  void ready(std::string_view prefix) const {
    if (!gradients_ready) return;
    float* begin = nullptr;
    float* end = nullptr;
    for (const Parameter& p : params.parameters) {
      if (!p.name.starts_with(prefix)) continue;
      if (!begin) begin = p.grad;
      end = p.grad + p.numel;
    }
    if (begin) gradients_ready(std::span<float>(begin, end));
  }

  void check_call(const std::int32_t* inputs, const std::int32_t* targets, int B, int T) const;
  void prepare(std::int64_t B, std::int64_t T);
  void forward(ProfileTimer& timer, const std::int32_t* inputs, std::int64_t B, std::int64_t T, bool train);
  double head(ProfileTimer& timer, const std::int32_t* targets, std::int64_t M, float loss_scale, bool backward,
              std::int64_t* count);
  void backward(ProfileTimer& timer, const std::int32_t* inputs, std::int64_t B, std::int64_t T);
};

void TrainableGPT2::Impl::check_call(const std::int32_t* inputs, const std::int32_t* targets, int B, int T) const {
  if (B < 1 || T < 1) throw ValueError(str("a batch needs B >= 1 and T >= 1 (got B = ", B, ", T = ", T, ")"));
  if (T > config.n_positions)
    throw ValueError(str("sequence length T = ", T, " exceeds the model's context of n_positions = ",
                         config.n_positions));
  const std::int64_t M = std::int64_t{B} * T;
  for (std::int64_t i = 0; i < M; ++i) {
    if (inputs[i] < 0 || inputs[i] >= config.vocab_size)
      throw IndexError(str("input id ", inputs[i], " at (", i / T, ", ", i % T, ") is outside the vocabulary of ",
                           config.vocab_size));
    if ((targets[i] < 0 && targets[i] != kIgnoreTarget) || targets[i] >= config.vocab_size)
      throw IndexError(str("target id ", targets[i], " at (", i / T, ", ", i % T,
                           ") is outside the vocabulary of ", config.vocab_size, " (", kIgnoreTarget,
                           " skips a position)"));
  }
}

void TrainableGPT2::Impl::prepare(std::int64_t B, std::int64_t T) {
  const std::int64_t needed = plan_activations(acts, config, B, T, nullptr);
  if (needed > static_cast<std::int64_t>(arena.size())) {
    arena = std::vector<float>();  // the old buffers go before the new ones come
    arena.resize(static_cast<std::size_t>(needed));
  }
  plan_activations(acts, config, B, T, arena.data());
}

void TrainableGPT2::Impl::forward(ProfileTimer& timer, const std::int32_t* inputs, std::int64_t B, std::int64_t T, bool train) {
  const ModelTensors& w = params.value;
  const std::int64_t M = B * T, C = config.n_embd, H = config.mlp_dim();
  const float eps = config.layer_norm_epsilon;
  const bool bf16 = precision == Precision::bf16;
  kernels::embedding_forward(acts.residual[0], inputs, w.wte, w.wpe, B, T, C);
  kernels::dropout(acts.residual[0], mask(train, embedding_site(), T * C), M * C);
  timer.lap(&TrainProfile::forward_other_ms);
  for (int l = 0; l < config.n_layer; ++l) {
    const LayerTensors& lw = w.layers[static_cast<std::size_t>(l)];
    LayerActivations& a = acts.layers[static_cast<std::size_t>(l)];
    const float* x = acts.residual[static_cast<std::size_t>(l)];
    kernels::layer_norm(a.ln_1, a.ln_1_mean, a.ln_1_rstd, x, lw.ln_1_weight, lw.ln_1_bias, M, C, eps);
    timer.lap(&TrainProfile::forward_other_ms);
    kernels::linear_forward(a.qkv, acts.scratch, a.ln_1, lw.qkv_weight, lw.qkv_bias, M, C, 3 * C, bf16);
    timer.lap(&TrainProfile::forward_matmul_ms);
    kernels::causal_attention_forward(a.attn, a.probs, a.qkv, a.qkv + C, a.qkv + 2 * C, 3 * C,
                                      mask(train, attention_site(l), config.n_head * T * T), B, T, config.n_head,
                                      config.head_dim());
    timer.lap(&TrainProfile::forward_attention_ms);
    kernels::linear_forward(acts.branch, acts.scratch, a.attn, lw.attn_proj_weight, lw.attn_proj_bias, M, C, C, bf16);
    timer.lap(&TrainProfile::forward_matmul_ms);
    kernels::dropout(acts.branch, mask(train, attn_resid_site(l), T * C), M * C);
    kernels::add(a.mid, x, acts.branch, M * C);
    kernels::layer_norm(a.ln_2, a.ln_2_mean, a.ln_2_rstd, a.mid, lw.ln_2_weight, lw.ln_2_bias, M, C, eps);
    timer.lap(&TrainProfile::forward_other_ms);
    kernels::linear_forward(a.fc, acts.scratch, a.ln_2, lw.fc_weight, lw.fc_bias, M, C, H, bf16);
    timer.lap(&TrainProfile::forward_matmul_ms);
    kernels::gelu_new(a.gelu, a.fc, M * H);
    timer.lap(&TrainProfile::forward_other_ms);
    kernels::linear_forward(acts.branch, acts.scratch, a.gelu, lw.mlp_proj_weight, lw.mlp_proj_bias, M, H, C, bf16);
    timer.lap(&TrainProfile::forward_matmul_ms);
    kernels::dropout(acts.branch, mask(train, mlp_resid_site(l), T * C), M * C);
    float* next = acts.residual[static_cast<std::size_t>(l) + 1];
    kernels::add(next, a.mid, acts.branch, M * C);
  }
  kernels::layer_norm(acts.ln_f, acts.ln_f_mean, acts.ln_f_rstd, acts.residual.back(), w.ln_f_weight, w.ln_f_bias, M,
                    C, eps);
  timer.lap(&TrainProfile::forward_other_ms);
}

double TrainableGPT2::Impl::head(ProfileTimer& timer, const std::int32_t* targets, std::int64_t M, float loss_scale,
                                 bool backward, std::int64_t* count) {
  *count = std::count_if(targets, targets + M, [](std::int32_t t) { return t >= 0; });
  const float dscale = *count > 0 ? static_cast<float>(static_cast<double>(loss_scale) / *count) : 0.0f;
  kernels::head_cross_entropy(acts.losses, backward ? acts.d_small : nullptr, backward ? params.grad.head : nullptr,
                              acts.scratch, acts.ln_f, params.value.head, targets, dscale, M, config.n_embd,
                              config.vocab_size, precision == Precision::bf16);
  timer.lap(&TrainProfile::head_ms);
  double sum = 0;
  for (std::int64_t i = 0; i < M; ++i) sum += acts.losses[i];
  return *count > 0 ? sum / static_cast<double>(*count) : 0.0;
}

void TrainableGPT2::Impl::backward(ProfileTimer& timer, const std::int32_t* inputs, std::int64_t B, std::int64_t T) {
  const ModelTensors& w = params.value;
  const ModelTensors& g = params.grad;
  const std::int64_t M = B * T, C = config.n_embd, H = config.mlp_dim();
  const bool bf16 = precision == Precision::bf16;
  float* d_res = acts.d_residual;
  // The gradient of a branch's output: d_res through the branch's dropout.
  const auto branch_grad = [&](std::uint64_t site) -> const float* {
    const DropoutMask m = mask(true, site, T * C);
    if (!m.active()) return d_res;
    std::copy(d_res, d_res + M * C, acts.d_branch);
    kernels::dropout(acts.d_branch, m, M * C);
    return acts.d_branch;
  };

  // Kept apart, the embedding's rows leave wte's gradient complete already: the head's part (tied)
  // and earlier calls'.
  if (keep_embedding_rows) ready("transformer.wte.");
  std::fill(d_res, d_res + M * C, 0.0f);
  kernels::layer_norm_backward(d_res, g.ln_f_weight, g.ln_f_bias, acts.d_small, acts.residual.back(), w.ln_f_weight,
                     acts.ln_f_mean, acts.ln_f_rstd, M, C);
  timer.lap(&TrainProfile::backward_other_ms);
  ready("transformer.ln_f.");
  if (!config.tie_word_embeddings) ready("lm_head.");
  for (int l = config.n_layer - 1; l >= 0; --l) {
    const LayerTensors& lw = w.layers[static_cast<std::size_t>(l)];
    const LayerTensors& lg = g.layers[static_cast<std::size_t>(l)];
    const LayerActivations& a = acts.layers[static_cast<std::size_t>(l)];
    // MLP: next = mid + dropout(gelu(ln_2(mid) @ fc) @ proj).
    const float* d_out = branch_grad(mlp_resid_site(l));
    timer.lap(&TrainProfile::backward_other_ms);
    kernels::linear_backward(acts.d_wide, lg.mlp_proj_weight, lg.mlp_proj_bias, d_out, a.gelu, lw.mlp_proj_weight, M,
                             H, C, bf16);
    timer.lap(&TrainProfile::backward_matmul_ms);
    kernels::gelu_backward(acts.d_wide, a.fc, acts.d_wide, M * H);
    timer.lap(&TrainProfile::backward_other_ms);
    kernels::linear_backward(acts.d_small, lg.fc_weight, lg.fc_bias, acts.d_wide, a.ln_2, lw.fc_weight, M, C, H, bf16);
    timer.lap(&TrainProfile::backward_matmul_ms);
    kernels::layer_norm_backward(d_res, lg.ln_2_weight, lg.ln_2_bias, acts.d_small, a.mid, lw.ln_2_weight, a.ln_2_mean,
                       a.ln_2_rstd, M, C);
    timer.lap(&TrainProfile::backward_other_ms);
    // Attention: mid = x + dropout(attention(ln_1(x) @ qkv) @ proj).
    d_out = branch_grad(attn_resid_site(l));
    timer.lap(&TrainProfile::backward_other_ms);
    kernels::linear_backward(acts.d_small, lg.attn_proj_weight, lg.attn_proj_bias, d_out, a.attn, lw.attn_proj_weight,
                             M, C, C, bf16);
    timer.lap(&TrainProfile::backward_matmul_ms);
    kernels::causal_attention_backward(acts.d_wide, acts.d_wide + C, acts.d_wide + 2 * C, acts.d_small, a.qkv,
                                       a.qkv + C, a.qkv + 2 * C, 3 * C, a.probs,
                                       mask(true, attention_site(l), config.n_head * T * T), B, T, config.n_head,
                                       config.head_dim());
    timer.lap(&TrainProfile::backward_attention_ms);
    kernels::linear_backward(acts.d_small, lg.qkv_weight, lg.qkv_bias, acts.d_wide, a.ln_1, lw.qkv_weight, M, C,
                             3 * C, bf16);
    timer.lap(&TrainProfile::backward_matmul_ms);
    kernels::layer_norm_backward(d_res, lg.ln_1_weight, lg.ln_1_bias, acts.d_small, acts.residual[static_cast<std::size_t>(l)],
                       lw.ln_1_weight, a.ln_1_mean, a.ln_1_rstd, M, C);
    timer.lap(&TrainProfile::backward_other_ms);
    ready(str("transformer.h.", l, "."));
  }
  const float* d_embedding = branch_grad(embedding_site());
  kernels::embedding_backward(keep_embedding_rows ? nullptr : g.wte, g.wpe, d_embedding, inputs, B, T, C);
  kept_rows = keep_embedding_rows ? std::span<const float>(d_embedding, static_cast<std::size_t>(M * C))
                                  : std::span<const float>();
  timer.lap(&TrainProfile::backward_other_ms);
  if (!keep_embedding_rows) ready("transformer.wte.");
  ready("transformer.wpe.");
}

TrainableGPT2::TrainableGPT2(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TrainableGPT2::TrainableGPT2(TrainableGPT2&&) noexcept = default;
TrainableGPT2& TrainableGPT2::operator=(TrainableGPT2&&) noexcept = default;
TrainableGPT2::~TrainableGPT2() = default;

TrainableGPT2 TrainableGPT2::init(const model::Config& config, std::uint64_t seed) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->params = make_parameter_set(config);
  initialize(impl->params, config, seed);
  return TrainableGPT2(std::move(impl));
}

TrainableGPT2 TrainableGPT2::load(const std::filesystem::path& dir) {
  const auto file = dir / "model.safetensors";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec))
    throw Error(str("no model.safetensors in '", dir.string(), "' (looked for '", file.string(), "')"));
  const model::Config config = model::Config::from_directory(dir);
  io::SafetensorsFile checkpoint = io::read_safetensors(file, io::LoadMode::Mapped);
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->params = make_parameter_set(config);
  load_values(impl->params, config, std::move(checkpoint.tensors), str("'", file.string(), "'"), true);
  return TrainableGPT2(std::move(impl));
}

TrainableGPT2 TrainableGPT2::from_tensors(const model::Config& config, std::map<std::string, Tensor> tensors,
                                          std::string_view source) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->params = make_parameter_set(config);
  load_values(impl->params, config, std::move(tensors), source, false);
  return TrainableGPT2(std::move(impl));
}

const model::Config& TrainableGPT2::config() const { return impl_->config; }
std::span<Parameter> TrainableGPT2::parameters() { return impl_->params.parameters; }
std::span<const Parameter> TrainableGPT2::parameters() const { return impl_->params.parameters; }
std::int64_t TrainableGPT2::parameter_count() const { return impl_->params.total; }

void TrainableGPT2::reserve(int B, int T) {
  if (B < 1 || T < 1 || T > impl_->config.n_positions)
    throw ValueError(str("reserve: needs B >= 1 and 1 <= T <= n_positions = ", impl_->config.n_positions,
                         " (got B = ", B, ", T = ", T, ")"));
  impl_->prepare(B, T);
}

std::int64_t TrainableGPT2::activation_bytes(int B, int T) const {
  Activations plan;
  return plan_activations(plan, impl_->config, B, T, nullptr) * static_cast<std::int64_t>(sizeof(float));
}

float TrainableGPT2::forward_backward(const std::int32_t* inputs, const std::int32_t* targets, int B, int T,
                                      float loss_scale) {
  Impl& m = *impl_;
  m.check_call(inputs, targets, B, T);
  m.prepare(B, T);
  const std::int64_t M = std::int64_t{B} * T;
  ProfileTimer timer(m.profile);
  m.forward(timer, inputs, B, T, true);
  std::int64_t count = 0;
  const double loss = m.head(timer, targets, M, loss_scale, true, &count);
  // With no target counted the gradients stay as they are; a hook still gets every group, as
  // data-parallel ranks must hand over the same groups whatever their rows hold.
  if (count > 0 || m.gradients_ready) m.backward(timer, inputs, B, T);
  ++m.counter;
  return static_cast<float>(loss);
}

float TrainableGPT2::evaluate(const std::int32_t* inputs, const std::int32_t* targets, int B, int T) {
  Impl& m = *impl_;
  m.check_call(inputs, targets, B, T);
  m.prepare(B, T);
  ProfileTimer timer(nullptr);
  m.forward(timer, inputs, B, T, false);
  std::int64_t count = 0;
  return static_cast<float>(m.head(timer, targets, std::int64_t{B} * T, 1.0f, false, &count));
}

void TrainableGPT2::zero_grad() {
  float* g = impl_->params.grads.data<float>();
  kernels::parallel_for(impl_->params.total, 1 << 18,
                        [&](std::int64_t i0, std::int64_t i1) { std::fill(g + i0, g + i1, 0.0f); });
}

void TrainableGPT2::set_dropout(const DropoutOptions& options) {
  if (!(options.probability >= 0.0f && options.probability < 1.0f))
    throw ValueError(str("dropout probability must be in [0, 1) (got ", options.probability, ")"));
  impl_->dropout = options;
}
const DropoutOptions& TrainableGPT2::dropout() const { return impl_->dropout; }
std::uint64_t TrainableGPT2::dropout_counter() const { return impl_->counter; }
void TrainableGPT2::set_dropout_counter(std::uint64_t counter) { impl_->counter = counter; }

double TrainableGPT2::grad_norm() const {
  return std::sqrt(kernels::sum_of_squares(impl_->params.grads.data<float>(), impl_->params.total));
}

float TrainableGPT2::clip_coefficient(double norm, double max_norm) {
  if (max_norm <= 0) return 1.0f;
  const double coefficient = max_norm / (norm + 1e-6);
  return coefficient < 1.0 ? static_cast<float>(coefficient) : 1.0f;
}

double TrainableGPT2::clip_grad_norm(double max_norm) {
  ProfileTimer timer(impl_->profile);
  const double norm = grad_norm();
  const float coefficient = clip_coefficient(norm, max_norm);
  if (coefficient != 1.0f) kernels::scale(impl_->params.grads.data<float>(), coefficient, impl_->params.total);
  timer.lap(&TrainProfile::grad_norm_ms);
  return norm;
}

void TrainableGPT2::set_precision(Precision precision) {
  require_precision(precision);
  impl_->precision = precision;
}
Precision TrainableGPT2::precision() const { return impl_->precision; }

void TrainableGPT2::set_profile(TrainProfile* profile) { impl_->profile = profile; }

void TrainableGPT2::set_first_row(std::int64_t row) {
  if (row < 0) throw ValueError(str("set_first_row: the row must not be negative (got ", row, ")"));
  impl_->first_row = row;
}
std::int64_t TrainableGPT2::first_row() const { return impl_->first_row; }

void TrainableGPT2::set_gradients_ready(GradientsReady hook) { impl_->gradients_ready = std::move(hook); }

void TrainableGPT2::set_keep_embedding_rows(bool keep) {
  impl_->keep_embedding_rows = keep;
  impl_->kept_rows = {};
}
std::span<const float> TrainableGPT2::kept_embedding_rows() const { return impl_->kept_rows; }

void TrainableGPT2::add_embedding_rows(std::span<const std::int32_t> inputs, std::span<const float> rows) {
  const std::int64_t C = impl_->config.n_embd, M = static_cast<std::int64_t>(inputs.size());
  if (static_cast<std::int64_t>(rows.size()) != M * C)
    throw ValueError(str("add_embedding_rows: ", rows.size(), " values for ", M, " inputs of n_embd ", C));
  for (const std::int32_t id : inputs)
    if (id < 0 || id >= impl_->config.vocab_size)
      throw IndexError(str("add_embedding_rows: input id ", id, " is outside the vocabulary of ",
                           impl_->config.vocab_size));
  if (M > 0) kernels::embedding_backward(impl_->params.grad.wte, nullptr, rows.data(), inputs.data(), 1, M, C);
}

std::span<float> TrainableGPT2::flat_values() {
  return {impl_->params.values.data<float>(), static_cast<std::size_t>(impl_->params.total)};
}
std::span<float> TrainableGPT2::flat_gradients() {
  return {impl_->params.grads.data<float>(), static_cast<std::size_t>(impl_->params.total)};
}

}  // namespace kael::train
