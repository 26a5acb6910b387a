// Joining and indexing: cat, stack, index_select, embedding.
#include <algorithm>
#include <cstring>

#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "kernels/elementwise.hpp"
#include "tensor/backward.hpp"
#include "tensor/strided.hpp"

namespace kael {

using namespace tensor_detail;

Tensor cat(const std::vector<Tensor>& tensors, int dim) {
  if (tensors.empty()) throw ValueError("cat: expects a non-empty list of tensors");
  const Tensor& first = tensors.front();
  if (first.dim() == 0) throw ValueError("cat: 0-D tensors cannot be concatenated; use stack");
  const int at = wrap_dim(dim, first.dim(), "cat");
  DType dt = first.dtype();
  std::int64_t total = 0;
  for (const Tensor& t : tensors) {
    dt = promote_types(dt, t.dtype());
    bool same = t.dim() == first.dim();
    for (int d = 0; same && d < t.dim(); ++d)
      same = d == at || t.shape()[static_cast<std::size_t>(d)] == first.shape()[static_cast<std::size_t>(d)];
    if (!same)
      throw ValueError(str("cat: shapes ", shape_to_string(first.shape()), " and ", shape_to_string(t.shape()),
                           " differ outside dim ", at));
    total += t.shape()[static_cast<std::size_t>(at)];
  }
  Shape shape = first.shape();
  shape[static_cast<std::size_t>(at)] = total;
  Tensor out = Tensor::empty(dt, shape);
  std::vector<const Tensor*> inputs;
  std::vector<std::int64_t> starts;
  std::int64_t start = 0;
  {
    autograd::NoGradGuard no_grad;
    for (const Tensor& t : tensors) {
      const std::int64_t n = t.shape()[static_cast<std::size_t>(at)];
      out.narrow(at, start, n).copy_(t);
      inputs.push_back(&t);
      starts.push_back(start);
      start += n;
    }
  }
  starts.push_back(start);
  return autograd::record("cat", std::move(out), inputs, [at, starts](const Tensor& g) { return cat_backward(g, at, starts); });
}

std::vector<Tensor> tensor_detail::cat_backward(const Tensor& g, int dim, const std::vector<std::int64_t>& starts) {
  std::vector<Tensor> grads;
  for (std::size_t i = 0; i + 1 < starts.size(); ++i) grads.push_back(g.narrow(dim, starts[i], starts[i + 1] - starts[i]));
  return grads;
}

Tensor stack(const std::vector<Tensor>& tensors, int dim) {
  if (tensors.empty()) throw ValueError("stack: expects a non-empty list of tensors");
  const int at = wrap_dim(dim, tensors.front().dim() + 1, "stack");
  std::vector<Tensor> expanded;
  for (const Tensor& t : tensors) {
    if (t.shape() != tensors.front().shape())
      throw ValueError(str("stack: shapes ", shape_to_string(tensors.front().shape()), " and ", shape_to_string(t.shape()),
                           " differ; stack needs equal shapes"));
    expanded.push_back(t.unsqueeze(at));
  }
  return cat(expanded, at);
}

Tensor index_select(const Tensor& a, int dim, const Tensor& index) {
  if (!is_integral(index.dtype()) || index.dim() > 1)
    throw TypeError(str("index_select: index must be a 1-D integer tensor, got ", dtype_name(index.dtype()), " of shape ",
                        shape_to_string(index.shape())));
  const int at = wrap_dim(dim, a.dim(), "index_select");
  const Tensor ids = index.to(DType::I64).contiguous().reshape({index.numel()});
  const std::int64_t size = a.dim() ? a.shape()[static_cast<std::size_t>(at)] : 1;
  Shape shape = a.shape();
  if (a.dim()) shape[static_cast<std::size_t>(at)] = ids.numel();
  Tensor out = Tensor::empty(a.dtype(), shape);
  const std::int64_t* p = ids.data<std::int64_t>();
  for (std::int64_t i = 0; i < ids.numel(); ++i)
    // torch's rule: ids are in [0, size), negative ones too are an error (t[ids] in Python
    // counts them from the end before it gets here).
    if (p[i] < 0 || p[i] >= size)
      throw IndexError(str("index_select: index ", p[i], " out of range [0, ", size, ") for dim ", at, " (shape ",
                           shape_to_string(a.shape()), ")"));
  if (a.is_contiguous() && a.dim() && a.device().type == Device::Type::cpu) {
    // Whole blocks of bytes: a copy_ per row (shapes, layout, a pool call) cost an embedding
    // of short rows many times the copying.
    const std::int64_t n = ids.numel(), outer = shape_numel(Shape(a.shape().begin(), a.shape().begin() + at));
    const auto block = static_cast<std::size_t>(a.nbytes() / std::max<std::int64_t>(outer * size, 1));
    const std::byte* source = a.raw_data();
    std::byte* target = out.raw_data();
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t i = 0; i < n; ++i)
        std::memcpy(target + (o * n + i) * block, source + (o * size + p[i]) * block, block);
  } else {
    autograd::NoGradGuard no_grad;
    for (std::int64_t i = 0; i < ids.numel(); ++i) out.select(at, i).copy_(a.select(at, p[i]));
  }
  const Shape from = a.shape();
  return autograd::record("index_select", std::move(out), {&a}, [ids, at, from](const Tensor& g) {
    return std::vector<Tensor>{index_select_backward(g, from, at, ids)};
  });
}

Tensor tensor_detail::index_select_backward(const Tensor& g, const Shape& input_shape, int dim, const Tensor& ids) {
  // Zeroed here rather than mapped zeroed (Tensor::zeros): a big table's gradient (GPT-2's
  // 154 MB of token embeddings, every step) reuses a freed block instead of having the kernel
  // clear each page of a fresh mapping that the rows' read-then-write touches.
  Tensor grad = Tensor::empty(g.dtype(), input_shape);
  std::memset(grad.raw_data(), 0, grad.nbytes());
  const std::int64_t* q = ids.data<std::int64_t>();
  if (dim == 0 && g.dtype() == DType::F32 && g.is_contiguous()) {  // an embedding's rows: row += g's row
    const std::int64_t width = shape_numel(Shape(input_shape.begin() + 1, input_shape.end()));
    float* rows = grad.data<float>();
    const float* grows = g.data<float>();
    for (std::int64_t i = 0; i < ids.numel(); ++i) kernels::add_inplace(rows + q[i] * width, grows + i * width, width);
    return grad;
  }
  for (std::int64_t i = 0; i < ids.numel(); ++i) {
    Tensor row = grad.select(dim, q[i]);
    row.copy_(add(row, g.select(dim, i)));  // repeated ids add up
  }
  return grad;
}

Tensor embedding(const Tensor& ids, const Tensor& weight) {
  if (weight.dim() != 2) throw ValueError(str("embedding: weight must be 2-D (num, dim), got ", shape_to_string(weight.shape())));
  Shape shape = ids.shape();
  shape.push_back(weight.shape()[1]);
  return index_select(weight, 0, ids.reshape({ids.numel()})).reshape(shape);
}

}  // namespace kael
