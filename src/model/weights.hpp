// The model's parameters as the kernels read them, decided in one place (weights.cpp).
//
// Layout. Whatever dtype the checkpoint stores (F32, F16, BF16, F64), parameters are read as F32.
// With the default dtype (f32) they stay F32: the four matrices of each block are packed at load
// into the panel layout of kernels/gemm.hpp (16 columns at a time, each panel contiguous), which
// the decode GEMV streams at the memory bandwidth and the GEMM micro-kernel reads without
// repacking; packing keeps the size (K * N floats). Everything else (embeddings, biases, LayerNorm)
// stays row-major as the checkpoint stores it, except the output head: wte (V, C) is packed as the
// (C, V) matrix the logits multiply by, in place, so the head is one more streamed GEMV/GEMM and a
// token's embedding is gathered from its column (embed()). A load from a file owns its tensors and
// packs each matrix in place (through one matrix of scratch), so the peak memory stays at the
// weights' size; tensors handed in by a caller, or mapped from the file, are left untouched and
// copied. The copies, and the narrow matrices below, lie one after another in one buffer on huge
// pages (WeightArena in weights.cpp). With
// LoadOptions::dtype f16 or int8, the four block matrices and the head are stored in that type
// instead (kernels/quant.hpp, kernels/int8.hpp), and a tied model's embedding lookup reads
// (dequantizes) the narrow head's columns, so no F32 copy of wte is kept; an untied model's wte
// stays row-major F32. Biases, LayerNorm and position embeddings are F32 in every dtype.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kael/core/tensor.hpp"
#include "kael/model/gpt2.hpp"
#include "kernels/quant.hpp"

namespace kael::model {

// One transformer block. C = n_embd, H = mlp_dim() (4C).
struct LayerWeights {
  const float* ln_1_weight = nullptr;   // (C)
  const float* ln_1_bias = nullptr;     // (C)
  const float* qkv_weight = nullptr;    // (C, 3C) packed  attn.c_attn: q, k, v side by side
  const float* qkv_bias = nullptr;      // (3C)
  const float* attn_proj_weight = nullptr;  // (C, C) packed  attn.c_proj
  const float* attn_proj_bias = nullptr;    // (C)
  const float* ln_2_weight = nullptr;   // (C)
  const float* ln_2_bias = nullptr;     // (C)
  const float* fc_weight = nullptr;     // (C, H) packed  mlp.c_fc
  const float* fc_bias = nullptr;       // (H)
  const float* mlp_proj_weight = nullptr;  // (H, C) packed  mlp.c_proj
  const float* mlp_proj_bias = nullptr;    // (C)
  // The four matrices as the forward pass reads them: the *_weight pointers above for f32,
  // int8 or F16 panels (those pointers null) otherwise.
  kernels::PackedMatrix qkv, attn_proj, fc, mlp_proj;
};

struct Weights {
  const float* wte = nullptr;  // (V, C) token embeddings; null when tied: they are head's columns
  const float* wpe = nullptr;  // (P, C) learned position embeddings
  std::vector<LayerWeights> layers;
  const float* ln_f_weight = nullptr;  // (C)
  const float* ln_f_bias = nullptr;    // (C)
  const float* lm_head = nullptr;      // (C, V) packed: the output head transposed (tied: wte, packed); f32 only
  kernels::PackedMatrix head;          // (C, V) packed, of the load's dtype: what the logits read
  std::int64_t parameter_count = 0;
  std::vector<Tensor> storage;  // owns (or keeps the mapping of) everything pointed to above
};

struct ParameterSpec;

// A checkpoint tensor matched to a parameter.
struct CheckpointTensor {
  std::string file_name;  // as spelled in the checkpoint, for messages
  Tensor tensor;
};

// The tensor of each of `specs` (parameter_specs(config)), in that order, after checking that
// every name is a parameter or a known buffer and that every parameter is present with its
// shape and a floating dtype (the errors load_weights gives). Unconverted. Consumes `tensors`.
// The training layer loads its F32 master copy through this too.
std::vector<CheckpointTensor> match_parameters(const Config& config, const std::vector<ParameterSpec>& specs,
                                               std::map<std::string, Tensor> tensors, std::string_view source);

// x (T, C) = wte[tokens[t]] + wpe[pos0 + t], from wherever the embeddings live.
void embed(float* x, const Weights& weights, const Config& config, const std::int32_t* tokens, std::int64_t T,
           std::int64_t pos0);

// Matches `tensors` (checkpoint names) to the parameters `config` calls for, checks names,
// shapes and dtypes before converting anything, then builds the weights. Consumes `tensors`.
// `source` names the checkpoint in messages. With `owned`, no one else holds the tensors'
// memory: matrices in memory of their own are packed in place, and the mapped pages of a
// matrix in a file mapping are released as soon as it is packed into new memory or converted.
// `dtype` chooses the storage of the block matrices and the head (WeightDType); biases, LayerNorm and position embeddings stay F32.
Weights load_weights(const Config& config, std::map<std::string, Tensor> tensors, std::string_view source,
                     bool owned = false, WeightDType dtype = WeightDType::f32);

}  // namespace kael::model
