// Picking elements by position along a dim: gather and topk. Both work on rows: the dim moved
// last and made contiguous, so that each row is one run of memory.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "tensor/backward.hpp"
#include "tensor/parallel.hpp"
#include "tensor/strided.hpp"

namespace kael {

using namespace tensor_detail;

namespace {

// The order that moves `dim` last (and, applied as a permute to the result, its inverse).
std::vector<int> dim_last_order(int rank, int dim) {
  std::vector<int> order;
  for (int d = 0; d < rank; ++d)
    if (d != dim) order.push_back(d);
  order.push_back(dim);
  return order;
}

std::vector<int> inverse_order(const std::vector<int>& order) {
  std::vector<int> inverse(order.size());
  for (std::size_t i = 0; i < order.size(); ++i) inverse[static_cast<std::size_t>(order[i])] = static_cast<int>(i);
  return inverse;
}

// out (rows, k) = a (rows, n)[r, index[r, j]] for contiguous a and I64 index, any dtype; the
// gradient adds each out element back to the place it came from.
Tensor gather_rows(const Tensor& a, const Tensor& index) {
  const std::int64_t rows = a.shape()[0], n = a.shape()[1], k = index.shape()[1];
  const std::int64_t* idx = index.data<std::int64_t>();
  for (std::int64_t i = 0; i < index.numel(); ++i)
    if (idx[i] < 0 || idx[i] >= n)
      throw IndexError(str("gather: index ", idx[i], " is out of bounds for a dim of size ", n));
  Tensor out = Tensor::empty(a.dtype(), {rows, k});
  const auto elem = static_cast<std::int64_t>(a.element_size());
  const std::byte* src = a.raw_data();
  std::byte* dst = out.raw_data();
  parallel_range(rows, k, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r)
      for (std::int64_t j = 0; j < k; ++j)
        std::memcpy(dst + (r * k + j) * elem, src + (r * n + idx[r * k + j]) * elem, static_cast<std::size_t>(elem));
  });
  if (!autograd::any_requires_grad({&a})) return out;
  const DType dt = a.dtype();
  return autograd::record("gather", std::move(out), {&a},
                          [index, n, dt](const Tensor& g) { return std::vector<Tensor>{gather_backward(g, index, n, dt)}; });
}

}  // namespace

Tensor tensor_detail::gather_backward(const Tensor& g, const Tensor& index, std::int64_t n, DType dtype) {
  const std::int64_t rows = index.shape()[0], k = index.shape()[1];
  const Tensor gd = dense(g.to(DType::F64));
  Tensor grad = Tensor::zeros(DType::F64, {rows, n});
  const double* pg = gd.data<double>();
  double* pd = grad.data<double>();
  const std::int64_t* ix = index.data<std::int64_t>();
  parallel_range(rows, k, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r)
      for (std::int64_t j = 0; j < k; ++j) pd[r * n + ix[r * k + j]] += pg[r * k + j];
  });
  return grad.to(dtype);
}

Tensor gather(const Tensor& a, int dim, const Tensor& index) {
  if (!is_integral(index.dtype())) throw TypeError(str("gather: index must be an integer tensor, got ", dtype_name(index.dtype())));
  if (a.dim() == 0 && index.dim() == 0) return gather(a.reshape({1}), 0, index.reshape({1})).reshape({});
  const int at = wrap_dim(dim, a.dim(), "gather");
  if (index.dim() != a.dim())
    throw ValueError(str("gather: index of shape ", shape_to_string(index.shape()), " must have as many dims as the input ",
                         shape_to_string(a.shape())));
  Tensor source = a;
  for (int d = 0; d < a.dim(); ++d) {
    if (d == at) continue;
    if (index.size(d) > a.size(d))
      throw ValueError(str("gather: index of shape ", shape_to_string(index.shape()), " is larger than the input ",
                           shape_to_string(a.shape()), " at dim ", d));
    if (index.size(d) < a.size(d)) source = source.narrow(d, 0, index.size(d));
  }
  const std::vector<int> order = dim_last_order(a.dim(), at);
  const Tensor rows = source.permute(order).contiguous();
  const Tensor ids = index.to(DType::I64).permute(order).contiguous();
  const Shape moved = ids.shape();
  const std::int64_t n = rows.shape().back(), k = moved.back();
  const Tensor picked = gather_rows(rows.reshape({-1, n}), ids.reshape({-1, k}));
  return picked.reshape(moved).permute(inverse_order(order));
}

std::pair<Tensor, Tensor> topk(const Tensor& a, std::int64_t k, int dim, bool largest, bool sorted) {
  (void)sorted;  // always sorted: the picked values come out in order, which torch allows
  const Tensor base = a.dim() == 0 ? a.reshape({1}) : a;
  const int at = wrap_dim(dim, base.dim(), "topk");
  const std::int64_t n = base.size(at);
  if (k < 0 || k > n) throw IndexError(str("topk: k (", k, ") is out of range for a dim of size ", n));
  if (base.dtype() == DType::BOOL) throw TypeError("topk: not defined for BOOL tensors");
  const std::vector<int> order = dim_last_order(base.dim(), at);
  const Tensor rows = base.detach().permute(order).to(DType::F64).contiguous();
  const std::int64_t count = n == 0 ? 0 : rows.numel() / n;
  Shape moved = rows.shape();
  moved.back() = k;
  Tensor index = Tensor::empty(DType::I64, moved);
  const double* values = rows.data<double>();
  std::int64_t* out = index.data<std::int64_t>();
  // NaN is the largest value (torch's order); equal values keep their positions' order.
  const auto before = [largest](double x, double y) {
    if (std::isnan(x) || std::isnan(y)) return largest ? (std::isnan(x) && !std::isnan(y)) : (!std::isnan(x) && std::isnan(y));
    return largest ? x > y : x < y;
  };
  parallel_range(count, n * 4, [&](std::int64_t r0, std::int64_t r1) {
    std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
    for (std::int64_t r = r0; r < r1; ++r) {
      const double* row = values + r * n;
      std::iota(ids.begin(), ids.end(), 0);
      std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](std::int64_t i, std::int64_t j) {
        return before(row[i], row[j]) || (!before(row[j], row[i]) && i < j);
      });
      std::copy(ids.begin(), ids.begin() + k, out + r * k);
    }
  });
  Tensor indices = index.permute(inverse_order(order)).contiguous();
  Tensor picked = gather(base, at, indices);
  if (a.dim() == 0) return {picked.reshape({}), indices.reshape({})};
  return {picked, indices};
}

}  // namespace kael
