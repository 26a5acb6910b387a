// Checkpoint tensors -> Weights, in three passes so that a bad checkpoint fails before any
// memory is spent on conversion: (1) every tensor name is matched to a parameter or a known
// buffer, (2) every parameter is checked for presence, shape and dtype, (3) the tensors are
// converted where needed and the pointers set. A throw at any point drops everything built so
// far (plain RAII): no half-loaded model exists.
#include "model/weights.hpp"

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <utility>

#include "kael/core/error.hpp"
#include "kael/io/safetensors.hpp"
#include "kernels/amx.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/embedding.hpp"
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

// Whether as_kernel_f32 makes new memory of `tensor`: anything but a contiguous, float-aligned
// F32 tensor (as io gives them) is converted or copied.
bool needs_copy(const Tensor& tensor) {
  const bool aligned = reinterpret_cast<std::uintptr_t>(tensor.raw_data()) % alignof(float) == 0;
  return tensor.dtype() != DType::F32 || !tensor.is_contiguous() || !aligned;
}

// An F32 tensor the kernels can read in place.
Tensor as_kernel_f32(Tensor tensor) {
  if (tensor.dtype() != DType::F32) return tensor.to_f32();
  if (needs_copy(tensor)) return tensor.packed_copy();
  return tensor;
}

// Whether the loader may rewrite (pack in place) the F32 tensor made of a checkpoint `tensor`:
// a converted or copied tensor is new memory, and an `owned` load's own tensors are ours; a
// tensor borrowed from a file mapping, or handed in by a caller, is not.
bool rewritable(const Tensor& tensor, bool owned) { return needs_copy(tensor) || (owned && !tensor.is_borrowed()); }

// The matrices the loader writes, one after another in the order a forward pass reads them, in
// one zeroed buffer (Tensor::zeros: on huge pages). Apart, every matrix under 2 MiB (int8 QKV and
// projection, F16 projection) and every tail past a whole 2 MiB stayed in 4 KiB pages, from which
// one thread's int8 decode products read 18-27 GB/s against 30-36 on huge pages
// (docs/performance.md, "Weights in one arena on huge pages"). Its pages are touched as the
// matrices are written, so the peak of a load is what it was with a tensor per matrix.
class WeightArena {
 public:
  static constexpr std::int64_t kAlign = 64;  // each part on its own cache lines
  static std::int64_t footprint(std::int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

  explicit WeightArena(std::int64_t bytes)
      : memory_(std::make_shared<Tensor>(Tensor::zeros(DType::U8, {bytes}))) {}

  // The next `bytes`, zeroed, aligned for any element type.
  std::byte* take(std::int64_t bytes) {
    if (used_ + footprint(bytes) > memory_->numel())  // sized by the caller's own count
      throw Error(str("internal: weight arena of ", memory_->numel(), " bytes overrun"));
    std::byte* part = memory_->raw_data() + used_;
    used_ += footprint(bytes);
    return part;
  }
  // The next tensor's worth, as a tensor that keeps the arena alive.
  Tensor take(DType dtype, const Shape& shape) {
    return Tensor::borrow(dtype, shape, take(shape_numel(shape) * static_cast<std::int64_t>(dtype_size(dtype))),
                          memory_);
  }
  const Tensor& memory() const { return *memory_; }

 private:
  std::shared_ptr<Tensor> memory_;
  std::int64_t used_ = 0;
};

// The four matrices of a block, which the kernels read packed (kernels/gemm.hpp).
bool is_block_matrix(const ParameterSpec& spec) {
  return spec.layer >= 0 && (spec.layer_slot == &LayerWeights::qkv_weight ||
                             spec.layer_slot == &LayerWeights::attn_proj_weight ||
                             spec.layer_slot == &LayerWeights::fc_weight ||
                             spec.layer_slot == &LayerWeights::mlp_proj_weight);
}

// The output head (wte or lm_head.weight, (V, C)) packed as its transpose (C, V), in place
// when `writable`, into `arena` otherwise.
Tensor pack_head(Tensor tensor, bool writable, WeightArena& arena) {
  const std::int64_t V = tensor.shape()[0], C = tensor.shape()[1];
  if (writable) {
    kernels::pack_panels_transposed(tensor.data<float>(), tensor.data<float>(), C, V);
    return tensor;
  }
  Tensor packed = arena.take(DType::F32, tensor.shape());
  kernels::pack_panels_transposed(packed.data<float>(), tensor.data<float>(), C, V);
  return packed;
}

// A (K, N) F32 matrix in the panel layout. In place when `writable` (scratch holds a copy of
// the source meanwhile; on a file mapping, this turns the mapped pages into private ones, the
// file is never written), into `arena` otherwise.
Tensor pack_matrix(Tensor tensor, bool writable, std::vector<float>& scratch, WeightArena& arena) {
  const std::int64_t K = tensor.shape()[0], N = tensor.shape()[1];
  if (writable) {
    float* data = tensor.data<float>();
    scratch.assign(data, data + K * N);
    kernels::pack_panels(data, scratch.data(), K, N);
    return tensor;
  }
  Tensor packed = arena.take(DType::F32, tensor.shape());
  kernels::pack_panels(packed.data<float>(), tensor.data<float>(), K, N);
  return packed;
}

// (K, N) of a matrix of `shape`: (K, N) as stored, or with `transposed` the head stored as (N, K).
std::pair<std::int64_t, std::int64_t> matrix_dims(const Shape& shape, bool transposed) {
  return {shape[transposed ? 1 : 0], shape[transposed ? 0 : 1]};
}

// The bytes narrow_matrix writes for a (K, N) matrix of a narrow dtype: its panels (or tiles),
// and its int8 group scales (0 where the type has none).
struct NarrowParts {
  std::int64_t panels = 0;
  std::int64_t scales = 0;
};
NarrowParts narrow_parts(std::int64_t K, std::int64_t N, WeightDType dtype) {
  if (dtype == WeightDType::bf16) return {2 * kernels::bf16_matrix_elements(K, N), 0};
  if (dtype == WeightDType::int8 && kernels::int8_per_column()) return {kernels::int8c_matrix_bytes(K, N), 0};
  if (dtype == WeightDType::int8) return {kernels::int8_weight_bytes(K, N), 2 * kernels::int8_scale_count(K, N)};
  return {2 * K * N, 0};
}

// A (K, N) F32 matrix, or with `transposed` the (N, K) head, as int8 (+ scales), F16 or BF16
// panels taken from `arena` (narrow_parts sizes them). `where` (source and tensor name) prefixes errors.
kernels::PackedMatrix narrow_matrix(const Tensor& tensor, bool transposed, WeightDType dtype, WeightArena& arena,
                                    std::string_view where) {
  const auto [K, N] = matrix_dims(tensor.shape(), transposed);
  const NarrowParts parts = narrow_parts(K, N, dtype);
  std::byte* panels = arena.take(parts.panels);
  const auto as_u16 = [](std::byte* p) { return reinterpret_cast<std::uint16_t*>(p); };
  try {
    if (dtype == WeightDType::bf16) {
      kernels::convert_bf16_tiles(as_u16(panels), tensor.data<float>(), K, N, transposed);
      return {WeightDType::bf16, panels, nullptr, true};
    }
    if (dtype == WeightDType::int8 && kernels::int8_per_column()) {  // int8, F32 and int32 parts
      kernels::quantize_int8c(reinterpret_cast<std::uint8_t*>(panels), tensor.data<float>(), K, N, transposed);
      return {WeightDType::int8, panels, nullptr, true};
    }
    if (dtype == WeightDType::int8) {
      std::uint16_t* scales = as_u16(arena.take(parts.scales));  // BF16 bits
      kernels::quantize_int8_panels(reinterpret_cast<std::int8_t*>(panels), scales, tensor.data<float>(), K, N,
                                    transposed);
      return {WeightDType::int8, panels, scales};
    }
    kernels::convert_f16_panels(as_u16(panels), tensor.data<float>(), K, N, transposed);
    return {WeightDType::f16, panels, nullptr};
  } catch (const ValueError& e) {  // a non-finite weight, named by its (k, n)
    throw ValueError(str(where, ": ", e.what()));
  }
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
  const auto is_head = [&](const ParameterSpec& spec) {
    return spec.global_slot == &Weights::lm_head || (spec.global_slot == &Weights::wte && config.tie_word_embeddings);
  };
  // What the matrices below take from the arena: every narrow one, and every F32 one that
  // cannot be packed in place.
  std::int64_t arena_bytes = 0;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const ParameterSpec& spec = specs[i];
    if (!is_block_matrix(spec) && !is_head(spec)) continue;
    const bool transposed = !is_block_matrix(spec);  // the head, stored as (V, C)
    const auto [K, N] = matrix_dims(spec.shape, transposed);
    if (narrow) {
      const NarrowParts parts = narrow_parts(K, N, dtype);
      arena_bytes += WeightArena::footprint(parts.panels) + WeightArena::footprint(parts.scales);
    } else if (!rewritable(found[i].tensor, owned)) {
      arena_bytes += WeightArena::footprint(4 * K * N);
    }
  }
  WeightArena arena(arena_bytes);
  if (arena_bytes > 0) weights.storage.push_back(arena.memory());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    // Converting one tensor at a time, and dropping its source right away, keeps the peak
    // close to the final size even for F16 checkpoints.
    const ParameterSpec& spec = specs[i];
    const std::string where = str(source, ": tensor '", found[i].file_name, "'");
    // A matrix still in the file's mapping is packed into the arena, not in place: decode
    // streams every weight, and on the mapping's 4 KiB pages it read them 10-15% slower
    // (docs/performance.md, "Decode against the bandwidth on a Zen 4").
    const bool writable = rewritable(found[i].tensor, owned);
    Tensor tensor = as_kernel_f32(std::move(found[i].tensor));
    found[i] = {};
    const bool head = is_head(spec);
    weights.parameter_count += tensor.numel();
    if (narrow && is_block_matrix(spec)) {
      // Only the narrow panels are kept; the F32 source is dropped here (and its mapped pages
      // released, or the whole file would stay resident beside the narrow copy).
      weights.layers[static_cast<std::size_t>(spec.layer)].*matrix_slot(spec) =
          narrow_matrix(tensor, false, dtype, arena, where);
      if (owned) io::release_mapped_pages(tensor);
      continue;
    }
    if (narrow && head) {
      // The head is a third of GPT-2 small's weights, so a narrow head cuts the logits time
      // (docs/performance.md, "The measurements behind the code's constants"). Tied, the
      // embedding lookup reads its columns too (embed()), so no F32 copy of wte is kept.
      weights.head = narrow_matrix(tensor, true, dtype, arena, where);
      if (owned) io::release_mapped_pages(tensor);
      continue;
    }
    if (is_block_matrix(spec) || head) {
      const Tensor source_tensor = tensor;
      tensor = head ? pack_head(std::move(tensor), writable, arena)
                    : pack_matrix(std::move(tensor), writable, scratch, arena);
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
