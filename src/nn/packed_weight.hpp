// Inference's copy of a linear layer's (out, in) F32 weight in the kernels' packed panel layout
// (kernels/gemm.hpp), so that a decode step reads every weight as one contiguous stream, as the
// engine does, instead of transposing it on the fly (the tensor library's batch-1 GEMV). The
// packed product has the bits of kernels::gemm's (each output one FMA chain over k in order,
// then the bias), so the result is the same whether or not a layer takes this path.
#pragma once

#include <mutex>

#include "kael/core/tensor.hpp"

namespace kael::nn::detail {

class PackedWeight {
 public:
  // x (..., in) @ weight^T + bias -> (..., out), through the packed copy of weight, packed
  // again when weight is another storage, shape or version than the copy was made from (the
  // tensor library bumps the version at every in-place write, as autograd's checks rely on; a
  // write through a raw pointer that does not bump it is not seen). Needs applies().
  Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);
  // Frees the copy: a forward that does not take this path (training, which changes the
  // weights at every step, a gradient, another dtype) would leave it to go stale.
  void clear();

  // Whether linear() applies: F32 x, weight (and bias) on the CPU, x's last dim the weight's
  // in features, nothing that records a gradient (grad mode off or no input requiring one), and
  // F32 products (not BF16 ones at float32 matmul precision "medium", which this copy lacks).
  static bool applies(const Tensor& x, const Tensor& weight, const Tensor& bias);

 private:
  Tensor packed_for(const Tensor& weight);

  std::mutex mutex_;  // one model may run forward on several threads
  Tensor source_;     // the weight the copy was made from (kept, so its storage is not reused)
  std::uint64_t version_ = 0;
  Tensor packed_;
};

}  // namespace kael::nn::detail
