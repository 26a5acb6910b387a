#include "kael/nn/layers.hpp"

#include <cmath>

#include "kael/core/error.hpp"
#include "kael/tensor/ops.hpp"
#include "nn/packed_weight.hpp"
#include "nn/uniform.hpp"

namespace kael::nn {

Tensor detail::uniform(Shape shape, double bound) { return (rand(std::move(shape)) * 2 - 1) * bound; }

using detail::uniform;

Linear::Linear(std::int64_t in_features, std::int64_t out_features, bool with_bias)
    : packed_(std::make_shared<detail::PackedWeight>()) {
  if (in_features <= 0 || out_features <= 0)
    throw ValueError(str("Linear: features must be positive, got in ", in_features, ", out ", out_features));
  // torch's kaiming_uniform_(a = sqrt(5)) and its bias rule both come to 1/sqrt(in).
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  weight = register_parameter("weight", uniform({out_features, in_features}, bound));
  if (with_bias) bias = register_parameter("bias", uniform({out_features}, bound));
}

Tensor Linear::forward(const Tensor& x) {
  if (!is_training() && detail::PackedWeight::applies(x, weight, bias)) return packed_->linear(x, weight, bias);
  packed_->clear();  // training, a gradient or another dtype: the copy would only go stale
  return linear(x, weight, bias);
}

Embedding::Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim) {
  if (num_embeddings <= 0 || embedding_dim <= 0)
    throw ValueError(str("Embedding: sizes must be positive, got ", num_embeddings, " x ", embedding_dim));
  weight = register_parameter("weight", randn({num_embeddings, embedding_dim}));
}

Tensor Embedding::forward(const Tensor& ids) { return embedding(ids, weight); }

LayerNorm::LayerNorm(Shape shape, double epsilon, bool elementwise_affine, bool with_bias)
    : normalized_shape(std::move(shape)), eps(epsilon) {
  if (elementwise_affine) {
    weight = register_parameter("weight", ones(normalized_shape));
    if (with_bias) bias = register_parameter("bias", zeros(normalized_shape));
  }
}

Tensor LayerNorm::forward(const Tensor& x) { return layer_norm(x, normalized_shape, weight, bias, eps); }

Dropout::Dropout(double probability) : p(probability) {
  if (!(p >= 0.0 && p <= 1.0)) throw ValueError(str("Dropout: p must be in [0, 1], got ", p));
}

Tensor Dropout::forward(const Tensor& x) { return dropout(x, p, is_training()); }

GELU::GELU(std::string how) : approximate(std::move(how)) {
  if (approximate != "none" && approximate != "tanh")
    throw ValueError(str("GELU: approximate must be 'none' or 'tanh', got '", approximate, "'"));
}

Tensor GELU::forward(const Tensor& x) { return gelu(x, approximate.c_str()); }

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& module : modules) push_back(module);
}

void Sequential::push_back(std::shared_ptr<Module> module) {
  modules_.push_back(register_module(std::to_string(modules_.size()), std::move(module)));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor out = x;
  for (const auto& module : modules_) out = module->forward(out);
  return out;
}

const std::shared_ptr<Module>& Sequential::operator[](std::size_t i) const {
  if (i >= modules_.size()) throw IndexError(str("Sequential: index ", i, " out of range for ", modules_.size(), " modules"));
  return modules_[i];
}

}  // namespace kael::nn
