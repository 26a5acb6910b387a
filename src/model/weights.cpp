// Checkpoint tensors -> Weights, in three passes so that a bad checkpoint fails before any
// memory is spent on conversion: (1) every tensor name is matched to a parameter or a known
// buffer, (2) every parameter is checked for presence, shape and dtype, (3) the tensors are
// converted where needed and the pointers set. A throw at any point drops everything built so
// far (plain RAII): no half-loaded model exists.
#include "model/weights.hpp"

#include <algorithm>
#include <cstdint>
#include <unordered_map>

#include "kael/core/error.hpp"
#include "kael/io/safetensors.hpp"
#include "kernels/amx.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/gemm.hpp"
#include "kernels/quant.hpp"
#include "model/weight_names.hpp"

namespace kael::model {
namespace {

using Found = CheckpointTensor;

bool convertible(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16 || dtype == DType::F64;
}

// Pass 1: each checkpoint tensor becomes a parameter (by spec index), a dropped buffer, or an error.
std::vector<std::optional<Found>> match_names(const Config& config, const std::vector<ParameterSpec>& specs,
                                              std::map<std::string, Tensor>& tensors, std::string_view source) {
  std::unordered_map<std::string_view, std::size_t> index;
  for (std::size_t i = 0; i < specs.size(); ++i) index.emplace(specs[i].name, i);
  const Shape head_shape{config.vocab_size, config.n_embd};

  std::vector<std::optional<Found>> found(specs.size());
  for (auto& [name, tensor] : tensors) {
    const std::string_view canonical = canonical_name(name);
    if (const auto it = index.find(canonical); it != index.end()) {
      auto& slot = found[it->second];
      if (slot)
        throw ValueError(str(source, ": tensors '", slot->file_name, "' and '", name, "' are the same parameter"));
      slot = Found{name, std::move(tensor)};
    } else if (is_ignored_buffer(canonical)) {
      continue;
    } else if (canonical == kHeadName) {
      // The tied head duplicates wte; it is dropped, but a wrong shape means a wrong config.
      if (tensor.shape() != head_shape)
        throw ValueError(str(source, ": tensor '", name, "' has shape ", shape_to_string(tensor.shape()),
                             ", expected ", shape_to_string(head_shape), " (tied to wte)"));
    } else if (const auto block = block_index(canonical); block && *block >= config.n_layer) {
      throw ValueError(str(source, ": tensor '", name, "' belongs to block ", *block, " but the config has n_layer ",
                           config.n_layer));
    } else {
      throw ValueError(str(source, ": unexpected tensor '", name, "' (not a GPT-2 parameter)"));
    }
  }
  tensors.clear();  // frees the dropped buffers now rather than after conversion
  return found;
}

// Pass 2: presence, shape, dtype.
void check_parameters(const std::vector<ParameterSpec>& specs, const std::vector<std::optional<Found>>& found,
                      std::string_view source) {
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const ParameterSpec& spec = specs[i];
    if (!found[i])
      throw Error(str(source, ": missing tensor '", spec.name, "' (expected shape ", shape_to_string(spec.shape),
                      ", with or without the 'transformer.' prefix)"));
    const Tensor& tensor = found[i]->tensor;
    const std::string& name = found[i]->file_name;
    if (tensor.shape() != spec.shape) {
      Shape reversed(spec.shape.rbegin(), spec.shape.rend());
      const bool transposed = spec.shape.size() == 2 && tensor.shape() == reversed;
      throw ValueError(str(source, ": tensor '", name, "' has shape ", shape_to_string(tensor.shape()), ", expected ",
                           shape_to_string(spec.shape),
                           transposed ? " (transposed? GPT-2 stores Conv1D weights as [in, out])" : ""));
    }
    if (!convertible(tensor.dtype()))
      throw TypeError(str(source, ": tensor '", name, "' has dtype ", dtype_name(tensor.dtype()),
                          ", expected F32, F16, BF16 or F64"));
  }
}

// An F32 tensor the kernels can read in place: contiguous and float-aligned. F32 tensors from
// io already are; anything else is converted or copied here.
Tensor as_kernel_f32(Tensor tensor) {
  if (tensor.dtype() != DType::F32) return tensor.to_f32();
  const bool aligned = reinterpret_cast<std::uintptr_t>(tensor.raw_data()) % alignof(float) == 0;
  if (!tensor.is_contiguous() || !aligned) return tensor.packed_copy();
  return tensor;
}

// The four matrices of a block, which the kernels read packed (kernels/gemm.hpp).
bool is_block_matrix(const ParameterSpec& spec) {
  return spec.layer >= 0 && (spec.layer_slot == &LayerWeights::qkv_weight ||
                             spec.layer_slot == &LayerWeights::attn_proj_weight ||
                             spec.layer_slot == &LayerWeights::fc_weight ||
                             spec.layer_slot == &LayerWeights::mlp_proj_weight);
}

// The output head (wte or lm_head.weight, (V, C)) packed as its transpose (C, V), in place
// when `writable`.
Tensor pack_head(Tensor tensor, bool writable) {
  const std::int64_t V = tensor.shape()[0], C = tensor.shape()[1];
  if (writable) {
    kernels::pack_panels_transposed(tensor.data<float>(), tensor.data<float>(), C, V);
    return tensor;
  }
  Tensor packed = Tensor::zeros(DType::F32, tensor.shape());
  kernels::pack_panels_transposed(packed.data<float>(), tensor.data<float>(), C, V);
  return packed;
}

// A (K, N) F32 matrix in the panel layout. In place when `writable` (scratch holds a copy of
// the source meanwhile; on a file mapping, this turns the mapped pages into private ones, the
// file is never written), into a new tensor otherwise.
Tensor pack_matrix(Tensor tensor, bool writable, std::vector<float>& scratch) {
  const std::int64_t K = tensor.shape()[0], N = tensor.shape()[1];
  if (writable) {
    float* data = tensor.data<float>();
    scratch.assign(data, data + K * N);
    kernels::pack_panels(data, scratch.data(), K, N);
    return tensor;
  }
  Tensor packed = Tensor::zeros(DType::F32, tensor.shape());
  kernels::pack_panels(packed.data<float>(), tensor.data<float>(), K, N);
  return packed;
}

// A (K, N) F32 matrix, or with `transposed` the (N, K) head, as int8 (+ scales) or F16
// panels in new tensors kept in `storage`. `where` (source and tensor name) prefixes errors.
kernels::PackedMatrix narrow_matrix(const Tensor& tensor, bool transposed, WeightDType dtype,
                                    std::vector<Tensor>& storage, std::string_view where) {
  const std::int64_t K = tensor.shape()[transposed ? 1 : 0], N = tensor.shape()[transposed ? 0 : 1];
  kernels::PackedMatrix m;
  if (dtype == WeightDType::bf16) {
    Tensor b = Tensor::zeros(DType::U16, {kernels::bf16_matrix_elements(K, N)});
    kernels::convert_bf16_tiles(b.data<std::uint16_t>(), tensor.data<float>(), K, N, transposed);
    m = {WeightDType::bf16, b.raw_data(), nullptr, true};
    storage.push_back(std::move(b));
  } else if (dtype == WeightDType::int8 && kernels::int8_per_column()) {
    Tensor q = Tensor::zeros(DType::U32, {kernels::int8c_matrix_bytes(K, N) / 4});  // int8, F32 and int32 parts
    try {
      kernels::quantize_int8c(reinterpret_cast<std::uint8_t*>(q.raw_data()), tensor.data<float>(), K, N, transposed);
    } catch (const ValueError& e) {
      throw ValueError(str(where, ": ", e.what()));
    }
    m = {WeightDType::int8, q.raw_data(), nullptr, true};
    storage.push_back(std::move(q));
  } else if (dtype == WeightDType::int8) {
    Tensor q = Tensor::zeros(DType::I8, {kernels::int8_weight_bytes(K, N)});
    Tensor scales = Tensor::zeros(DType::U16, {kernels::int8_scale_count(K, N)});  // BF16 bits
    try {
      kernels::quantize_int8_panels(q.data<std::int8_t>(), scales.data<std::uint16_t>(), tensor.data<float>(), K, N,
                                    transposed);
    } catch (const ValueError& e) {  // a non-finite weight, named by its (k, n)
      throw ValueError(str(where, ": ", e.what()));
    }
    m = {WeightDType::int8, q.raw_data(), scales.data<std::uint16_t>()};
    storage.push_back(std::move(q));
    storage.push_back(std::move(scales));
  } else {
    Tensor h = Tensor::zeros(DType::U16, {K, N});
    kernels::convert_f16_panels(h.data<std::uint16_t>(), tensor.data<float>(), K, N, transposed);
    m = {WeightDType::f16, h.raw_data(), nullptr};
    storage.push_back(std::move(h));
  }
  return m;
}

kernels::PackedMatrix LayerWeights::*matrix_slot(const ParameterSpec& spec) {
  if (spec.layer_slot == &LayerWeights::qkv_weight) return &LayerWeights::qkv;
  if (spec.layer_slot == &LayerWeights::attn_proj_weight) return &LayerWeights::attn_proj;
  if (spec.layer_slot == &LayerWeights::fc_weight) return &LayerWeights::fc;
  return &LayerWeights::mlp_proj;
}

}  // namespace

std::vector<CheckpointTensor> match_parameters(const Config& config, const std::vector<ParameterSpec>& specs,
                                               std::map<std::string, Tensor> tensors, std::string_view source) {
  std::vector<std::optional<Found>> found = match_names(config, specs, tensors, source);
  check_parameters(specs, found, source);
  std::vector<CheckpointTensor> matched;
  matched.reserve(found.size());
  for (auto& f : found) matched.push_back(std::move(*f));
  return matched;
}

Weights load_weights(const Config& config, std::map<std::string, Tensor> tensors, std::string_view source,
                     bool owned, WeightDType dtype) {
  config.validate(source);
  if (dtype == WeightDType::bf16) kernels::require_bf16();
  const bool narrow = dtype != WeightDType::f32;
  const std::vector<ParameterSpec> specs = parameter_specs(config);
  std::vector<CheckpointTensor> found = match_parameters(config, specs, std::move(tensors), source);

  Weights weights;
  weights.layers.resize(static_cast<std::size_t>(config.n_layer));
  weights.storage.reserve(specs.size());
  std::vector<float> scratch;  // one matrix, for packing in place
  for (std::size_t i = 0; i < specs.size(); ++i) {
    // Converting one tensor at a time, and dropping its source right away, keeps the peak
    // close to the final size even for F16 checkpoints.
    const ParameterSpec& spec = specs[i];
    const void* source_data = found[i].tensor.raw_data();
    const std::string where = str(source, ": tensor '", found[i].file_name, "'");
    Tensor tensor = as_kernel_f32(std::move(found[i].tensor));
    found[i] = {};
    // A converted or copied tensor is new memory, ours to rewrite whoever gave the source. A
    // matrix still in the file's mapping is packed into new memory instead, on huge pages
    // (Tensor::zeros): decode streams every weight, and on the mapping's 4 KiB pages it read
    // them 10-15% slower (docs/performance.md, "Decode against the bandwidth on a Zen 4").
    const bool writable = !tensor.is_borrowed() && (owned || tensor.raw_data() != source_data);
    const bool head = spec.global_slot == &Weights::lm_head ||
                      (spec.global_slot == &Weights::wte && config.tie_word_embeddings);
    weights.parameter_count += tensor.numel();
    if (narrow && is_block_matrix(spec)) {
      // Only the narrow panels are kept; the F32 source is dropped here (and its mapped pages
      // released, or the whole file would stay resident beside the narrow copy).
      weights.layers[static_cast<std::size_t>(spec.layer)].*matrix_slot(spec) =
          narrow_matrix(tensor, false, dtype, weights.storage, where);
      if (owned) io::release_mapped_pages(tensor);
      continue;
    }
    if (narrow && head) {
      // The head is a third of GPT-2 small's weights, so a narrow head cuts the logits time
      // (docs/performance.md, "The measurements behind the code's constants"). Tied, the
      // embedding lookup reads its columns too (embed()), so no F32 copy of wte is kept.
      weights.head = narrow_matrix(tensor, true, dtype, weights.storage, where);
      if (owned) io::release_mapped_pages(tensor);
      continue;
    }
    if (is_block_matrix(spec) || head) {
      const Tensor source_tensor = tensor;
      tensor = head ? pack_head(std::move(tensor), writable) : pack_matrix(std::move(tensor), writable, scratch);
      if (owned) io::release_mapped_pages(source_tensor);  // a mapping's: or the file stays resident beside the copy
    }
    const float* data = tensor.data<float>();
    if (spec.layer < 0) {
      weights.*spec.global_slot = data;
    } else {
      LayerWeights& layer = weights.layers[static_cast<std::size_t>(spec.layer)];
      layer.*spec.layer_slot = data;
      if (is_block_matrix(spec)) layer.*matrix_slot(spec) = {WeightDType::f32, data, nullptr};
    }
    weights.storage.push_back(std::move(tensor));
  }
  if (!narrow) {
    if (config.tie_word_embeddings) {
      weights.lm_head = weights.wte;  // packed above
      weights.wte = nullptr;
    }
    weights.head = {WeightDType::f32, weights.lm_head, nullptr};
  }
  return weights;
}

void embed(float* x, const Weights& weights, const Config& config, const std::int32_t* tokens, std::int64_t T,
           std::int64_t pos0) {
  const std::int64_t C = config.n_embd;
  if (weights.wte != nullptr) {
    kernels::embedding(x, tokens, weights.wte, weights.wpe, T, C, pos0);
    return;
  }
  for (std::int64_t t = 0; t < T; ++t) {
    float* row = x + t * C;
    kernels::unpack_matrix_column(row, weights.head, C, config.vocab_size, tokens[t]);
    kernels::add_inplace(row, weights.wpe + (pos0 + t) * C, C);
  }
}

}  // namespace kael::model
