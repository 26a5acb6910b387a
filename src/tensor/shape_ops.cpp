// Ops that cut, tile, shift or mask a tensor by position: split, chunk, unbind, repeat, roll,
// tril, triu, as_strided_scatter, one_hot, and bmm. Composed of views and the differentiable
// ops where that costs nothing, so their gradients follow.
#include <algorithm>

#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "tensor/backward.hpp"
#include "tensor/strided.hpp"

namespace kael {

using namespace tensor_detail;

std::vector<Tensor> split(const Tensor& a, std::int64_t split_size, int dim) {
  if (a.dim() == 0) throw ValueError("split: cannot split a 0-D tensor");
  const int at = wrap_dim(dim, a.dim(), "split");
  const std::int64_t n = a.size(at);
  if (split_size < 0 || (split_size == 0 && n != 0))
    throw ValueError(str("split: split_size must be positive, got ", split_size));
  std::vector<Tensor> pieces;
  if (n == 0) return {a};
  for (std::int64_t start = 0; start < n; start += split_size) pieces.push_back(a.narrow(at, start, std::min(split_size, n - start)));
  return pieces;
}

std::vector<Tensor> split(const Tensor& a, const std::vector<std::int64_t>& sizes, int dim) {
  if (a.dim() == 0) throw ValueError("split: cannot split a 0-D tensor");
  const int at = wrap_dim(dim, a.dim(), "split");
  std::int64_t total = 0;
  for (std::int64_t s : sizes) {
    if (s < 0) throw ValueError(str("split: sizes must be non-negative, got ", s));
    total += s;
  }
  if (total != a.size(at))
    throw ValueError(str("split: sizes add up to ", total, " but dim ", at, " has size ", a.size(at)));
  std::vector<Tensor> pieces;
  std::int64_t start = 0;
  for (std::int64_t s : sizes) {
    pieces.push_back(a.narrow(at, start, s));
    start += s;
  }
  return pieces;
}

std::vector<Tensor> chunk(const Tensor& a, std::int64_t chunks, int dim) {
  if (chunks <= 0) throw ValueError(str("chunk: chunks must be positive, got ", chunks));
  if (a.dim() == 0) throw ValueError("chunk: cannot chunk a 0-D tensor");
  const std::int64_t n = a.size(wrap_dim(dim, a.dim(), "chunk"));
  return split(a, std::max<std::int64_t>((n + chunks - 1) / chunks, 1), dim);
}

std::vector<Tensor> unbind(const Tensor& a, int dim) {
  if (a.dim() == 0) throw ValueError("unbind: cannot unbind a 0-D tensor");
  const int at = wrap_dim(dim, a.dim(), "unbind");
  std::vector<Tensor> pieces;
  for (std::int64_t i = 0; i < a.size(at); ++i) pieces.push_back(a.select(at, i));
  return pieces;
}

Tensor repeat(const Tensor& a, const Shape& repeats) {
  if (repeats.size() < static_cast<std::size_t>(a.dim()))
    throw ValueError(str("repeat: ", repeats.size(), " repeats for a tensor of ", a.dim(), " dims; give at least one per dim"));
  for (std::int64_t r : repeats)
    if (r < 0) throw ValueError(str("repeat: repeats must be non-negative, got ", shape_to_string(repeats)));
  // Each dim s becomes (1, s) expanded to (r, s), then merged: the copy is the reshape's.
  Shape padded(repeats.size() - static_cast<std::size_t>(a.dim()), 1);
  padded.insert(padded.end(), a.shape().begin(), a.shape().end());
  Shape split_shape, expanded, merged;
  for (std::size_t i = 0; i < padded.size(); ++i) {
    split_shape.insert(split_shape.end(), {1, padded[i]});
    expanded.insert(expanded.end(), {repeats[i], padded[i]});
    merged.push_back(repeats[i] * padded[i]);
  }
  return a.reshape(split_shape).expand(expanded).reshape(merged);
}

Tensor roll(const Tensor& a, const std::vector<std::int64_t>& shifts, const std::vector<int>& dims) {
  if (dims.empty()) {
    if (shifts.size() != 1) throw ValueError(str("roll: without dims, one shift is needed, got ", shifts.size()));
    return roll(a.flatten(), shifts, {0}).reshape(a.shape());
  }
  if (shifts.size() != dims.size())
    throw ValueError(str("roll: ", shifts.size(), " shifts for ", dims.size(), " dims; give one per dim"));
  Tensor out = a;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const int at = wrap_dim(dims[i], a.dim(), "roll");
    const std::int64_t n = a.size(at);
    if (n == 0) continue;
    const std::int64_t s = ((shifts[i] % n) + n) % n;
    if (s == 0) continue;
    out = cat({out.narrow(at, n - s, s), out.narrow(at, 0, n - s)}, at);
  }
  return out;
}

namespace {

// tril / triu: a where (col - row) <= diagonal (lower) or >= diagonal (upper), else 0.
Tensor triangle(const char* op, const Tensor& a, std::int64_t diagonal, bool lower) {
  if (a.dim() < 2) throw ValueError(str(op, ": needs a tensor of at least 2 dims, got shape ", shape_to_string(a.shape())));
  const std::int64_t rows = a.size(a.dim() - 2), cols = a.size(a.dim() - 1);
  const Tensor row = arange(0, static_cast<double>(rows), 1, DType::I64).reshape({rows, 1});
  const Tensor col = arange(0, static_cast<double>(cols), 1, DType::I64).reshape({1, cols});
  const Tensor offset = sub(col, row);
  const Tensor keep = lower ? le(offset, diagonal) : ge(offset, diagonal);
  return where(keep, a, zeros({}, a.dtype()));
}

}  // namespace

Tensor tril(const Tensor& a, std::int64_t diagonal) { return triangle("tril", a, diagonal, true); }
Tensor triu(const Tensor& a, std::int64_t diagonal) { return triangle("triu", a, diagonal, false); }

Tensor bmm(const Tensor& a, const Tensor& b) {
  if (a.dim() != 3 || b.dim() != 3 || a.size(0) != b.size(0) || a.size(2) != b.size(1))
    throw ValueError(str("bmm: expects (B, n, m) and (B, m, p), got shapes ", shape_to_string(a.shape()), " and ",
                         shape_to_string(b.shape())));
  return matmul(a, b);
}

namespace {

// ValueError unless the view (size, stride, offset) stays inside `numel` contiguous elements.
void check_view_inside(const char* op, const Shape& size, const std::vector<std::int64_t>& stride, std::int64_t offset,
                       std::int64_t numel) {
  if (size.size() != stride.size())
    throw ValueError(str(op, ": size ", shape_to_string(size), " and stride ", shape_to_string(stride),
                         " differ in length"));
  std::int64_t last = offset;  // the furthest element the view reaches
  for (std::size_t i = 0; i < size.size(); ++i) {
    if (size[i] < 0 || stride[i] < 0) throw ValueError(str(op, ": negative size or stride"));
    if (size[i] > 0) last += (size[i] - 1) * stride[i];
  }
  if (offset < 0 || (shape_numel(size) > 0 && last >= numel))
    throw ValueError(str(op, ": the view (size ", shape_to_string(size), ", stride ", shape_to_string(stride),
                         ", offset ", offset, ") reaches past the ", numel, " elements of the input"));
}

}  // namespace

Tensor as_strided_scatter(const Tensor& input, const Tensor& src, const Shape& size,
                          const std::vector<std::int64_t>& stride, std::int64_t offset) {
  check_view_inside("as_strided_scatter", size, stride, offset, input.numel());
  Tensor out = dense_copy(input);
  {
    autograd::NoGradGuard no_grad;
    out.as_strided(size, stride, offset).copy_(src);
  }
  if (!autograd::any_requires_grad({&input, &src})) return out;
  const Shape src_shape = src.shape();
  const DType src_dtype = src.dtype();
  return autograd::record("as_strided_scatter", std::move(out), {&input, &src},
                          [size, stride, offset, src_shape, src_dtype](const Tensor& g) {
                            return as_strided_scatter_backward(g, size, stride, offset, src_shape, src_dtype);
                          });
}

std::vector<Tensor> tensor_detail::as_strided_scatter_backward(const Tensor& g, const Shape& size,
                                                               const std::vector<std::int64_t>& stride,
                                                               std::int64_t offset, const Shape& src_shape,
                                                               DType src_dtype) {
  check_view_inside("as_strided_scatter_backward", size, stride, offset, g.numel());
  Tensor rest = dense_copy(g);
  rest.as_strided(size, stride, offset).zero_();
  const Tensor picked = dense(g).as_strided(size, stride, offset);
  return {rest, sum_to(picked, src_shape).to(src_dtype)};
}

Tensor one_hot(const Tensor& ids, std::int64_t num_classes) {
  if (ids.dtype() != DType::I64) throw TypeError(str("one_hot: ids must be I64, got ", dtype_name(ids.dtype())));
  const std::vector<std::int64_t> values = ids.to_vector<std::int64_t>();
  for (std::int64_t v : values)
    if (v < 0) throw ValueError(str("one_hot: class values must be non-negative, got ", v));
  if (num_classes < 0) {
    if (values.empty()) throw ValueError("one_hot: cannot infer num_classes from an empty tensor");
    num_classes = *std::max_element(values.begin(), values.end()) + 1;
  }
  Shape shape = ids.shape();
  shape.push_back(num_classes);
  Tensor out = Tensor::zeros(DType::I64, shape);
  std::int64_t* o = out.data<std::int64_t>();
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i] >= num_classes)
      throw ValueError(str("one_hot: class value ", values[i], " is not below num_classes ", num_classes));
    o[static_cast<std::int64_t>(i) * num_classes + values[i]] = 1;
  }
  return out;
}

}  // namespace kael
