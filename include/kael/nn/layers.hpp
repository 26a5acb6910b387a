// The layers of kael::nn, as torch.nn's: the same parameters, names, shapes and initialization.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "kael/nn/module.hpp"

namespace kael::nn {

namespace detail {
class PackedWeight;  // nn/packed_weight.hpp
}

// y = x W^T + b: weight (out, in), bias (out); both uniform in +-1/sqrt(in), as torch's.
// In eval mode with nothing recording a gradient (inference: NoGradGuard, or no input requiring
// one), an F32 layer keeps a copy of its weight packed for the kernels and multiplies with it,
// as the engine decodes (the same bits as the tensor library's product); the copy is made
// again after the weight changes and freed by a forward that does not use it (training mode, a
// gradient, another dtype). Inference thus holds the weight twice.
class Linear : public Module {
 public:
  Linear(std::int64_t in_features, std::int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;  // (..., in) -> (..., out)
  std::string name() const override { return "Linear"; }
  Tensor weight, bias;  // bias undefined without one

 private:
  std::shared_ptr<detail::PackedWeight> packed_;
};

// Rows of weight (num, dim) picked by integer ids: (ids...) -> (ids..., dim); N(0, 1) init.
class Embedding : public Module {
 public:
  Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim);
  Tensor forward(const Tensor& ids) override;
  std::string name() const override { return "Embedding"; }
  Tensor weight;
};

// Normalizes over the last dims (normalized_shape), then * weight + bias (ones and zeros;
// bias = false: weight alone, as torch's).
class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true, bool bias = true);
  explicit LayerNorm(std::int64_t features, double eps = 1e-5) : LayerNorm(Shape{features}, eps) {}
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "LayerNorm"; }
  Tensor weight, bias;
  Shape normalized_shape;
  double eps;
};

// Zeroes elements with probability p while training (the rest scaled by 1/(1-p)); the identity in eval().
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Dropout"; }
  double p;
};

// approximate "none" (the erf form) or "tanh" (GPT-2's).
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "GELU"; }
  std::string approximate;
};

// Children named "0", "1", ... applied in order.
class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  void push_back(std::shared_ptr<Module> module);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Sequential"; }
  std::size_t size() const { return modules_.size(); }
  const std::shared_ptr<Module>& operator[](std::size_t i) const;

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

// Children named "0", "1", ... of one type, held for the parent to call (GPT's blocks).
template <class M>
class ModuleList : public Module {
 public:
  void push_back(std::shared_ptr<M> module) {
    modules_.push_back(register_module(std::to_string(modules_.size()), std::move(module)));
  }
  std::size_t size() const { return modules_.size(); }
  M& operator[](std::size_t i) const { return *modules_.at(i); }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }
  std::string name() const override { return "ModuleList"; }

 private:
  std::vector<std::shared_ptr<M>> modules_;
};

}  // namespace kael::nn
