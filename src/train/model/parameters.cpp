#include "train/model/parameters.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kael/io/safetensors.hpp"
#include "kernels/infra/thread_pool.hpp"
#include "model/weight_names.hpp"
#include "model/weights.hpp"
#include "train/model/random.hpp"

namespace kael::train {
namespace {

// Where each per-block parameter of the model layer's name table goes in LayerTensors.
struct LayerSlot {
  const float* model::LayerWeights::*spec_slot;
  float* LayerTensors::*slot;
};
constexpr LayerSlot kLayerSlots[] = {
    {&model::LayerWeights::ln_1_weight, &LayerTensors::ln_1_weight},
    {&model::LayerWeights::ln_1_bias, &LayerTensors::ln_1_bias},
    {&model::LayerWeights::qkv_weight, &LayerTensors::qkv_weight},
    {&model::LayerWeights::qkv_bias, &LayerTensors::qkv_bias},
    {&model::LayerWeights::attn_proj_weight, &LayerTensors::attn_proj_weight},
    {&model::LayerWeights::attn_proj_bias, &LayerTensors::attn_proj_bias},
    {&model::LayerWeights::ln_2_weight, &LayerTensors::ln_2_weight},
    {&model::LayerWeights::ln_2_bias, &LayerTensors::ln_2_bias},
    {&model::LayerWeights::fc_weight, &LayerTensors::fc_weight},
    {&model::LayerWeights::fc_bias, &LayerTensors::fc_bias},
    {&model::LayerWeights::mlp_proj_weight, &LayerTensors::mlp_proj_weight},
    {&model::LayerWeights::mlp_proj_bias, &LayerTensors::mlp_proj_bias},
};

void bind(ModelTensors& view, const model::ParameterSpec& spec, float* data) {
  if (spec.layer >= 0) {
    for (const LayerSlot& s : kLayerSlots)
      if (s.spec_slot == spec.layer_slot) view.layers[static_cast<std::size_t>(spec.layer)].*s.slot = data;
    return;
  }
  if (spec.global_slot == &model::Weights::wte) view.wte = data;
  if (spec.global_slot == &model::Weights::wpe) view.wpe = data;
  if (spec.global_slot == &model::Weights::ln_f_weight) view.ln_f_weight = data;
  if (spec.global_slot == &model::Weights::ln_f_bias) view.ln_f_bias = data;
  if (spec.global_slot == &model::Weights::lm_head) view.head = data;
}

// Hugging Face's name as GPT2LMHeadModel's state_dict spells it.
std::string hf_name(const std::string& canonical) {
  return canonical == model::kHeadName ? canonical : std::string(model::kTransformerPrefix) + canonical;
}

bool is_residual_projection(const std::string& name) { return name.ends_with("c_proj.weight"); }
bool is_layer_norm(const std::string& name) { return name.find("ln_") != std::string::npos; }

}  // namespace

ParameterSet make_parameter_set(const model::Config& config, bool gradients) {
  config.validate();
  const std::vector<model::ParameterSpec> specs = model::parameter_specs(config);
  ParameterSet set;
  for (const auto& spec : specs) set.total += shape_numel(spec.shape);
  set.values = Tensor::zeros(DType::F32, {set.total});
  if (gradients) set.grads = Tensor::zeros(DType::F32, {set.total});
  set.value.layers.resize(static_cast<std::size_t>(config.n_layer));
  set.grad.layers.resize(static_cast<std::size_t>(config.n_layer));
  std::int64_t offset = 0;
  for (const auto& spec : specs) {
    Parameter p;
    p.name = hf_name(spec.name);
    p.shape = spec.shape;
    p.numel = shape_numel(spec.shape);
    p.data = set.values.data<float>() + offset;
    p.grad = gradients ? set.grads.data<float>() + offset : nullptr;
    p.weight_decay = spec.shape.size() >= 2;
    bind(set.value, spec, p.data);
    bind(set.grad, spec, p.grad);
    offset += p.numel;
    set.parameters.push_back(std::move(p));
  }
  if (config.tie_word_embeddings) {
    set.value.head = set.value.wte;
    set.grad.head = set.grad.wte;
  }
  return set;
}

void initialize(ParameterSet& set, const model::Config& config, std::uint64_t seed) {
  constexpr double kStd = 0.02;  // transformers' initializer_range default
  const double residual_std = kStd / std::sqrt(2.0 * config.n_layer);
  for (std::size_t i = 0; i < set.parameters.size(); ++i) {
    Parameter& p = set.parameters[i];
    if (p.shape.size() < 2) {  // biases 0, LayerNorm weight 1 and bias 0
      const float value = is_layer_norm(p.name) && p.name.ends_with(".weight") ? 1.0f : 0.0f;
      std::fill(p.data, p.data + p.numel, value);
      continue;
    }
    const double std = is_residual_projection(p.name) ? residual_std : kStd;
    kernels::parallel_for(p.numel, 1 << 16, [&](std::int64_t j0, std::int64_t j1) {
      for (std::int64_t j = j0; j < j1; ++j)
        p.data[j] = static_cast<float>(std * standard_normal(seed, i, static_cast<std::uint64_t>(j)));
    });
  }
}

void load_values(ParameterSet& set, const model::Config& config, std::map<std::string, Tensor> tensors,
                 std::string_view source, bool mapped) {
  const std::vector<model::ParameterSpec> specs = model::parameter_specs(config);
  std::vector<model::CheckpointTensor> found = model::match_parameters(config, specs, std::move(tensors), source);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    Tensor& tensor = found[i].tensor;
    const Tensor f32 = tensor.dtype() == DType::F32 ? (tensor.is_contiguous() ? tensor : tensor.packed_copy()) : tensor.to_f32();
    std::memcpy(set.parameters[i].data, f32.raw_data(), f32.nbytes());
    if (mapped) io::release_mapped_pages(tensor);
    tensor = Tensor();
  }
}

}  // namespace kael::train
