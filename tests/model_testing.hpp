// Helpers for the model tests: a tiny random GPT-2 checkpoint in memory, named as Hugging Face
// names it, and a naive full-sequence forward pass written from docs/behaviour.md ("The forward
// pass") with no kael kernels, to check the model's wiring (layouts, transposes, the head)
// independently.
#pragma once

#include <algorithm>
#include <cmath>
#include <numbers>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kael/core/tensor.hpp"
#include "kael/model/gpt2.hpp"
#include "model/state.hpp"

namespace kael::model::testing {

// 2 layers, 3 heads of 4, 37 tokens, 80 positions.
inline Config tiny_config() {
  Config c;
  c.n_layer = 2;
  c.n_head = 3;
  c.n_embd = 12;
  c.n_positions = 80;
  c.vocab_size = 37;
  return c;
}

inline Tensor random_tensor(Shape shape, std::mt19937& rng, float mean, float stddev) {
  Tensor t = Tensor::zeros(DType::F32, std::move(shape));
  std::normal_distribution<float> normal(mean, stddev);
  float* data = t.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) data[i] = normal(rng);
  return t;
}

// Every parameter random (LayerNorm weights around 1) with checkpoint names, no prefix.
inline std::map<std::string, Tensor> tiny_checkpoint(const Config& c, unsigned seed = 1) {
  std::mt19937 rng(seed);
  const std::int64_t C = c.n_embd, H = c.mlp_dim();
  std::map<std::string, Tensor> t;
  t["wte.weight"] = random_tensor({c.vocab_size, C}, rng, 0, 0.5f);
  t["wpe.weight"] = random_tensor({c.n_positions, C}, rng, 0, 0.3f);
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string h = "h." + std::to_string(i) + ".";
    t[h + "ln_1.weight"] = random_tensor({C}, rng, 1, 0.2f);
    t[h + "ln_1.bias"] = random_tensor({C}, rng, 0, 0.2f);
    t[h + "attn.c_attn.weight"] = random_tensor({C, 3 * C}, rng, 0, 0.4f);
    t[h + "attn.c_attn.bias"] = random_tensor({3 * C}, rng, 0, 0.2f);
    t[h + "attn.c_proj.weight"] = random_tensor({C, C}, rng, 0, 0.4f);
    t[h + "attn.c_proj.bias"] = random_tensor({C}, rng, 0, 0.2f);
    t[h + "ln_2.weight"] = random_tensor({C}, rng, 1, 0.2f);
    t[h + "ln_2.bias"] = random_tensor({C}, rng, 0, 0.2f);
    t[h + "mlp.c_fc.weight"] = random_tensor({C, H}, rng, 0, 0.4f);
    t[h + "mlp.c_fc.bias"] = random_tensor({H}, rng, 0, 0.2f);
    t[h + "mlp.c_proj.weight"] = random_tensor({H, C}, rng, 0, 0.3f);
    t[h + "mlp.c_proj.bias"] = random_tensor({C}, rng, 0, 0.2f);
  }
  t["ln_f.weight"] = random_tensor({C}, rng, 1, 0.2f);
  t["ln_f.bias"] = random_tensor({C}, rng, 0, 0.2f);
  return t;
}

// Shallow copies (tensors share bytes), since loading consumes its map.
inline std::map<std::string, Tensor> share(const std::map<std::string, Tensor>& tensors) { return tensors; }

// tiny_config() with room for more than one prefill chunk (kChunk positions, model/state.hpp),
// so prompts of kChunk - 1, kChunk and kChunk + 1 tokens straddle the boundary.
inline Config chunk_config() {
  Config c = tiny_config();
  c.n_positions = static_cast<int>(kChunk) + 24;
  return c;
}

// n ids cycling through [0, vocab) in a fixed, irregular order that `salt` shifts (so
// sessions get different prompts).
inline std::vector<std::int32_t> some_ids(std::size_t n, std::int32_t vocab, std::size_t salt = 0) {
  std::vector<std::int32_t> ids(n);
  for (std::size_t i = 0; i < n; ++i)
    ids[i] = static_cast<std::int32_t>((i * 17 + 3 + salt * 5) % static_cast<std::size_t>(vocab));
  return ids;
}

// A test fixture: the tiny checkpoint of make_config() and the model loaded from it.
template <Config (*make_config)()>
class ModelFixture : public ::testing::Test {
 protected:
  Config config = make_config();
  std::map<std::string, Tensor> tensors = tiny_checkpoint(config);
  GPT2 model = GPT2::from_tensors(config, share(tensors));
};
using TinyModel = ModelFixture<tiny_config>;
using ChunkModel = ModelFixture<chunk_config>;

// Naive forward over the whole sequence in double: logits (V) of the last position.
inline std::vector<double> naive_last_logits(const Config& c, const std::map<std::string, Tensor>& t,
                                             const std::vector<std::int32_t>& ids) {
  const std::int64_t T = static_cast<std::int64_t>(ids.size()), C = c.n_embd, H = c.mlp_dim(), NH = c.n_head,
                     D = C / NH;
  const auto w = [&](const std::string& name) { return t.at(name).data<float>(); };
  using Matrix = std::vector<std::vector<double>>;
  const auto layer_norm = [&](const Matrix& x, const float* g, const float* b) {
    Matrix out(x.size(), std::vector<double>(static_cast<std::size_t>(C)));
    for (std::size_t r = 0; r < x.size(); ++r) {
      double mean = 0, var = 0;
      for (double v : x[r]) mean += v;
      mean /= static_cast<double>(C);
      for (double v : x[r]) var += (v - mean) * (v - mean);
      var /= static_cast<double>(C);
      for (std::int64_t i = 0; i < C; ++i)
        out[r][i] = (x[r][i] - mean) / std::sqrt(var + c.layer_norm_epsilon) * g[i] + b[i];
    }
    return out;
  };
  // x (T, in) @ W (in, out) + b: Conv1D.
  const auto conv1d = [&](const Matrix& x, const float* W, const float* b, std::int64_t in, std::int64_t out_dim) {
    Matrix out(x.size(), std::vector<double>(static_cast<std::size_t>(out_dim)));
    for (std::size_t r = 0; r < x.size(); ++r)
      for (std::int64_t o = 0; o < out_dim; ++o) {
        double sum = b[o];
        for (std::int64_t i = 0; i < in; ++i) sum += x[r][i] * W[i * out_dim + o];
        out[r][o] = sum;
      }
    return out;
  };
  Matrix x(static_cast<std::size_t>(T), std::vector<double>(static_cast<std::size_t>(C)));
  for (std::int64_t p = 0; p < T; ++p)
    for (std::int64_t i = 0; i < C; ++i) x[p][i] = w("wte.weight")[ids[p] * C + i] + w("wpe.weight")[p * C + i];
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    const Matrix qkv = conv1d(layer_norm(x, w(h + "ln_1.weight"), w(h + "ln_1.bias")), w(h + "attn.c_attn.weight"),
                              w(h + "attn.c_attn.bias"), C, 3 * C);
    Matrix att(static_cast<std::size_t>(T), std::vector<double>(static_cast<std::size_t>(C), 0.0));
    for (std::int64_t head = 0; head < NH; ++head)
      for (std::int64_t p = 0; p < T; ++p) {
        std::vector<double> s(static_cast<std::size_t>(p + 1));
        double max = -INFINITY, sum = 0;
        for (std::int64_t q = 0; q <= p; ++q) {
          double dot = 0;
          for (std::int64_t d = 0; d < D; ++d) dot += qkv[p][head * D + d] * qkv[q][C + head * D + d];
          s[q] = dot / std::sqrt(static_cast<double>(D));
          max = std::max(max, s[q]);
        }
        for (double& v : s) sum += v = std::exp(v - max);
        for (std::int64_t q = 0; q <= p; ++q)
          for (std::int64_t d = 0; d < D; ++d) att[p][head * D + d] += s[q] / sum * qkv[q][2 * C + head * D + d];
      }
    const Matrix proj = conv1d(att, w(h + "attn.c_proj.weight"), w(h + "attn.c_proj.bias"), C, C);
    for (std::int64_t p = 0; p < T; ++p)
      for (std::int64_t i = 0; i < C; ++i) x[p][i] += proj[p][i];
    Matrix fc = conv1d(layer_norm(x, w(h + "ln_2.weight"), w(h + "ln_2.bias")), w(h + "mlp.c_fc.weight"),
                       w(h + "mlp.c_fc.bias"), C, H);
    for (auto& row : fc)
      for (double& v : row) v = 0.5 * v * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (v + 0.044715 * v * v * v)));
    const Matrix mlp = conv1d(fc, w(h + "mlp.c_proj.weight"), w(h + "mlp.c_proj.bias"), H, C);
    for (std::int64_t p = 0; p < T; ++p)
      for (std::int64_t i = 0; i < C; ++i) x[p][i] += mlp[p][i];
  }
  const Matrix last = layer_norm({x.back()}, w("ln_f.weight"), w("ln_f.bias"));
  std::vector<double> logits(static_cast<std::size_t>(c.vocab_size));
  for (std::int64_t v = 0; v < c.vocab_size; ++v)
    for (std::int64_t i = 0; i < C; ++i) logits[v] += last[0][i] * w("wte.weight")[v * C + i];
  return logits;
}

}  // namespace kael::model::testing
