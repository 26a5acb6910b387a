#include "nn/packed_weight.hpp"

#include "kael/tensor/autograd.hpp"
#include "kernels/gemm.hpp"
#include "tensor/f32_product.hpp"

namespace kael::nn::detail {

bool PackedWeight::applies(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const Device cpu = Device::cpu();
  if (x.dtype() != DType::F32 || weight.dtype() != DType::F32 || x.device() != cpu || weight.device() != cpu) return false;
  if (weight.dim() != 2 || x.dim() == 0 || x.shape().back() != weight.size(1) || x.numel() == 0 || weight.numel() == 0)
    return false;  // the tensor library's linear says what is wrong, or has nothing to multiply
  if (bias.defined() &&
      (bias.dtype() != DType::F32 || bias.device() != cpu || bias.dim() != 1 || bias.size(0) != weight.size(0)))
    return false;
  // The packed copy is F32 panels for kernels::gemm: with BF16 products (float32 matmul
  // precision "medium") the tensor library's linear runs them instead.
  if (tensor_detail::bf16_products()) return false;
  return !autograd::any_requires_grad({&x, &weight, &bias});
}

Tensor PackedWeight::packed_for(const Tensor& weight) {
  const std::lock_guard lock(mutex_);
  const bool same = packed_.defined() && source_.raw_data() == weight.raw_data() && source_.shape() == weight.shape() &&
                    source_.strides() == weight.strides() && version_ == weight.version();
  if (!same) {
    packed_ = Tensor();  // the old copy freed before the new one is made
    const std::int64_t N = weight.size(0), K = weight.size(1);
    const Tensor dense = weight.detach().contiguous();
    Tensor packed = Tensor::empty(DType::F32, {N * K});
    kernels::pack_panels_transposed(packed.data<float>(), dense.data<float>(), K, N);
    source_ = weight.detach();
    version_ = weight.version();
    packed_ = packed;
  }
  return packed_;
}

Tensor PackedWeight::linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const std::int64_t N = weight.size(0), K = weight.size(1), T = x.numel() / K;
  const Tensor packed = packed_for(weight);
  const Tensor rows = x.detach().contiguous();
  const Tensor b = bias.defined() ? bias.detach().contiguous() : Tensor();
  Shape shape = x.shape();
  shape.back() = N;
  Tensor out = Tensor::empty(DType::F32, std::move(shape));
  kernels::linear_packed(out.data<float>(), rows.data<float>(), packed.data<float>(),
                         b.defined() ? b.data<float>() : nullptr, T, K, N);
  return out;
}

void PackedWeight::clear() {
  const std::lock_guard lock(mutex_);
  packed_ = Tensor();
  source_ = Tensor();
}

}  // namespace kael::nn::detail
