// torch.nn.utils.clip_grad_norm_ (clip_grad.hpp): the per-gradient norms, then the norm of
// those, as torch takes it; sums in double. An F32 gradient's 2-norm is the kernels'
// (kernels::sum_of_squares, in a fixed order whatever the threads and instruction set).
#include "kael/optim/clip_grad.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kael/core/error.hpp"
#include "kael/tensor/autograd.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/training.hpp"

namespace kael::optim {

namespace {

template <class T>
double norm_of(const T* x, std::int64_t n, double p) {
  if (std::isinf(p)) {
    double largest = 0;
    for (std::int64_t i = 0; i < n; ++i) largest = std::max(largest, std::abs(static_cast<double>(x[i])));
    return largest;
  }
  double total = 0;
  if (p == 2.0) {
    for (std::int64_t i = 0; i < n; ++i) total += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    return std::sqrt(total);
  }
  for (std::int64_t i = 0; i < n; ++i) total += std::pow(std::abs(static_cast<double>(x[i])), p);
  return std::pow(total, 1.0 / p);
}

// The norm of one gradient, of any floating dtype. The kernel is F32's alone: F64 and the
// other orders keep norm_of's sequential loop. F32 and F64 are read where they lie (contiguous()
// copies only a strided view): to_f32() copied every F32 gradient into a fresh zeroed tensor
// (8 MB a step for a 10000 x 200 embedding and head, their pages cleared by the kernel).
double gradient_norm(const Tensor& g, double p) {
  const Tensor c = g.dtype() == DType::F64 || (g.dtype() == DType::F32 && g.device().type == Device::Type::cpu)
                     ? g.contiguous()
                     : g.to_f32();
  if (c.dtype() == DType::F64) return norm_of(c.data<double>(), c.numel(), p);
  if (p == 2.0) return std::sqrt(kernels::sum_of_squares(c.data<float>(), c.numel()));
  return norm_of(c.data<float>(), c.numel(), p);
}

}  // namespace

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type, bool error_if_nonfinite) {
  if (!(norm_type > 0))
    throw ValueError("clip_grad_norm_: norm_type must be positive or inf, not " + std::to_string(norm_type));
  autograd::NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const Tensor& p : params)
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return 0.0;

  std::vector<double> norms;
  for (const Tensor& g : grads) norms.push_back(gradient_norm(g, norm_type));
  const double total = norm_of(norms.data(), static_cast<std::int64_t>(norms.size()), norm_type);
  if (error_if_nonfinite && !std::isfinite(total))
    throw ValueError("clip_grad_norm_: the total norm of order " + std::to_string(norm_type) +
                     " of the gradients is non-finite, so it cannot be clipped");
  const double coefficient = std::min(max_norm / (total + 1e-6), 1.0);
  for (Tensor& g : grads) {  // as torch, even when the factor is 1
    if (g.dtype() == DType::F32 && g.is_contiguous() && g.device().type == Device::Type::cpu) {
      // In place, each x * float(coefficient) as mul_'s F32 product, without its out-of-place
      // result and copy back.
      kernels::scale(g.data<float>(), static_cast<float>(coefficient), g.numel());
      g.bump_version();
    } else {
      g.mul_(coefficient);
    }
  }
  return total;
}

}  // namespace kael::optim
