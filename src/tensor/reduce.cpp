// Reductions: sums in double (floats) or int64 (integers and BOOL), max/min with indices.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "kernels/dispatch/kernel_table.hpp"
#include "tensor/backward.hpp"
#include "tensor/device_elementwise.hpp"
#include "tensor/parallel.hpp"
#include "tensor/strided.hpp"

namespace kael {

using namespace tensor_detail;

namespace {

// Which dims a reduction removes (all when `dims` is empty), validated.
std::vector<bool> reduced_dims(const char* op, const Tensor& a, const std::vector<int>& dims) {
  std::vector<bool> reduce(static_cast<std::size_t>(a.dim()), dims.empty());
  for (int d : dims) {
    const int at = wrap_dim(d, a.dim(), op);
    if (a.dim() == 0) continue;
    if (reduce[static_cast<std::size_t>(at)]) throw ValueError(str(op, ": dim ", at, " appears twice"));
    reduce[static_cast<std::size_t>(at)] = true;
  }
  return reduce;
}

Shape kept_shape(const Tensor& a, const std::vector<bool>& reduce, bool keepdim) {
  Shape out;
  for (std::size_t i = 0; i < reduce.size(); ++i)
    if (!reduce[i]) out.push_back(a.shape()[i]);
    else if (keepdim) out.push_back(1);
  return out;
}

// Elements per block of a whole-tensor sum: blocks are summed alone and then in order, so the
// result is the same whatever the number of threads.
constexpr std::int64_t kSumBlock = std::int64_t{1} << 14;

// The sum of read(i) for i in [begin, end) in 8 interleaved chains (a fixed order, which the
// compiler can keep in vector lanes), then added together.
template <class Acc, class Read>
Acc block_sum(const Read& read, std::int64_t begin, std::int64_t end) {
  Acc lane[8] = {};
  std::int64_t i = begin;
  for (; i + 8 <= end; i += 8)
    for (int l = 0; l < 8; ++l) lane[l] += read(i + l);
  for (; i < end; ++i) lane[0] += read(i);
  Acc total{};
  for (const Acc v : lane) total += v;
  return total;
}

// out (outer, inner) = the sums over r of a (outer, R, inner) read by flat index: the
// reduced dims of a contiguous tensor when they are consecutive. A whole-tensor sum goes in
// blocks; otherwise each output is one chain over r in order, with threads taking rows of
// `outer` or, for a single row, columns of `inner`.
template <class Acc, class Read>
void flat_sum(Acc* out, std::int64_t outer, std::int64_t R, std::int64_t inner, const Read& read) {
  if (outer * inner == 1) {
    const std::int64_t blocks = (R + kSumBlock - 1) / kSumBlock;
    std::vector<Acc> partial(static_cast<std::size_t>(blocks));
    parallel_range(blocks, kSumBlock, [&](std::int64_t b0, std::int64_t b1) {
      for (std::int64_t b = b0; b < b1; ++b)
        partial[static_cast<std::size_t>(b)] = block_sum<Acc>(read, b * kSumBlock, std::min(R, (b + 1) * kSumBlock));
    });
    Acc total{};
    for (const Acc v : partial) total += v;
    out[0] = total;
    return;
  }
  if (outer > 1) {
    parallel_range(outer, R * inner, [&](std::int64_t o0, std::int64_t o1) {
      for (std::int64_t o = o0; o < o1; ++o)
        for (std::int64_t r = 0; r < R; ++r)
          for (std::int64_t i = 0; i < inner; ++i) out[o * inner + i] += read((o * R + r) * inner + i);
    });
    return;
  }
  parallel_range(inner, R, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t r = 0; r < R; ++r)
      for (std::int64_t i = i0; i < i1; ++i) out[i] += read(r * inner + i);
  });
}

// out (outer) = the sums in double of the rows of p (outer, R), on the kernel table's sum
// (kernels/sum.hpp) in blocks of kSumBlock added in order: a single row has its blocks summed
// on several threads, many rows are split between threads, and either way a row has one order.
void f32_row_sums(double* out, std::int64_t outer, std::int64_t R, const float* p) {
  const auto kernel_sum = kernels::active_kernels().sum;
  const std::int64_t blocks = (R + kSumBlock - 1) / kSumBlock;
  const auto block = [&](const float* row, std::int64_t b) {
    return kernel_sum(row + b * kSumBlock, std::min(kSumBlock, R - b * kSumBlock));
  };
  if (outer == 1) {
    std::vector<double> partial(static_cast<std::size_t>(blocks));
    parallel_range(blocks, kSumBlock, [&](std::int64_t b0, std::int64_t b1) {
      for (std::int64_t b = b0; b < b1; ++b) partial[static_cast<std::size_t>(b)] = block(p, b);
    });
    double total = 0;
    for (const double v : partial) total += v;
    out[0] = total;
    return;
  }
  parallel_range(outer, R, [&](std::int64_t o0, std::int64_t o1) {
    for (std::int64_t o = o0; o < o1; ++o) {
      double total = 0;
      for (std::int64_t b = 0; b < blocks; ++b) total += block(p + o * R, b);
      out[o] = total;
    }
  });
}

// (outer, R, inner) when a is contiguous and its reduced dims are consecutive, else R = -1.
struct FlatSplit {
  std::int64_t outer = 1, R = -1, inner = 1;
};
FlatSplit flat_split(const Tensor& a, const std::vector<bool>& reduce) {
  FlatSplit split;
  if (!a.is_contiguous() || a.numel() == 0) return split;
  std::size_t first = reduce.size(), last = 0;
  for (std::size_t i = 0; i < reduce.size(); ++i) {
    if (!reduce[i]) continue;
    first = std::min(first, i);
    last = i;
  }
  if (first == reduce.size()) return split;
  std::int64_t R = 1;
  for (std::size_t i = 0; i < reduce.size(); ++i) {
    const std::int64_t d = a.shape()[i];
    if (i < first) split.outer *= d;
    else if (i > last) split.inner *= d;
    else if (!reduce[i]) return split;  // a kept dim between reduced ones
    else R *= d;
  }
  split.R = R;
  return split;
}

// out (a's shape with reduced dims 1) = the sum of a over them, in double or int64.
Tensor sum_raw(const Tensor& input, const std::vector<bool>& reduce, DType out_dtype) {
  if (input.dim() == 0) return dense_copy(input.detach().to(out_dtype));
  if (on_device(input)) return device_sum(input, reduce);  // float32 only so far, which keeps its dtype
  Shape keep_shape = input.shape();
  for (std::size_t i = 0; i < reduce.size(); ++i)
    if (reduce[i]) keep_shape[i] = 1;
  const bool floating = is_floating(out_dtype);
  Tensor acc = Tensor::zeros(floating ? DType::F64 : DType::I64, keep_shape);
  if (input.numel() == 0) return acc.to(out_dtype);
  // A strided operand, or reduced dims with a kept one between them, is first copied (on the
  // pool's threads) with the kept dims first and the reduced ones last, so that every sum takes
  // the flat path, in the order a contiguous tensor of the same values has.
  Tensor a = input;
  FlatSplit split = flat_split(a, reduce);
  if (split.R < 0) {
    std::vector<int> order;
    std::vector<bool> moved_reduce;
    for (const bool reduced : {false, true})
      for (std::size_t i = 0; i < reduce.size(); ++i)
        if (reduce[i] == reduced) {
          order.push_back(static_cast<int>(i));
          moved_reduce.push_back(reduced);
        }
    a = dense_copy(input.detach().permute(order));
    split = flat_split(a, moved_reduce);
  }
  const auto accumulate = [&]<class Acc>(Acc* out) {
    const DType dt = a.dtype();
    const std::byte* base = a.raw_data();
    const auto elem = static_cast<std::int64_t>(a.element_size());
    if constexpr (std::is_same_v<Acc, double>) {
      if (dt == DType::F32 && split.inner == 1) {
        f32_row_sums(out, split.outer, split.R, a.data<float>());
        return;
      }
    }
    if (dt == DType::F32) {
      const float* p = a.data<float>();
      flat_sum(out, split.outer, split.R, split.inner, [p](std::int64_t i) { return static_cast<Acc>(p[i]); });
    } else {
      flat_sum(out, split.outer, split.R, split.inner, [=](std::int64_t i) { return load<Acc>(dt, base + i * elem); });
    }
  };
  if (floating) accumulate(acc.data<double>());
  else accumulate(acc.data<std::int64_t>());
  return acc.to(out_dtype);
}

}  // namespace

Tensor sum(const Tensor& a, std::vector<int> dims, bool keepdim) {
  const std::vector<bool> reduce = reduced_dims("sum", a, dims);
  const DType dt = is_floating(a.dtype()) ? a.dtype() : DType::I64;
  Tensor out = sum_raw(a, reduce, dt).reshape(kept_shape(a, reduce, keepdim));
  const Shape from = a.shape();
  Shape keep_shape = from;
  for (std::size_t i = 0; i < reduce.size(); ++i)
    if (reduce[i]) keep_shape[i] = 1;
  return autograd::record("sum", std::move(out), {&a}, [from, keep_shape](const Tensor& g) {
    return std::vector<Tensor>{sum_backward(g, from, keep_shape)};
  });
}

Tensor tensor_detail::sum_backward(const Tensor& g, const Shape& input_shape, const Shape& kept_shape) {
  return dense_copy(g.reshape(kept_shape).expand(input_shape));
}

Tensor mean(const Tensor& a, std::vector<int> dims, bool keepdim) {
  if (!is_floating(a.dtype()))
    throw TypeError(str("mean: needs a floating tensor, got ", dtype_name(a.dtype()), "; convert with to(DType::F32)"));
  const std::vector<bool> reduce = reduced_dims("mean", a, dims);
  std::int64_t count = 1;
  for (std::size_t i = 0; i < reduce.size(); ++i)
    if (reduce[i]) count *= a.shape()[i];
  return div(sum(a, dims, keepdim), static_cast<double>(count));
}

Tensor var(const Tensor& a, std::vector<int> dims, bool keepdim, int correction) {
  if (!is_floating(a.dtype())) throw TypeError(str("var: needs a floating tensor, got ", dtype_name(a.dtype())));
  const std::vector<bool> reduce = reduced_dims("var", a, dims);
  std::int64_t count = 1;
  for (std::size_t i = 0; i < reduce.size(); ++i)
    if (reduce[i]) count *= a.shape()[i];
  const Tensor centered = sub(a, mean(a, dims, true));
  return div(sum(mul(centered, centered), dims, keepdim), static_cast<double>(std::max<std::int64_t>(count - correction, 0)));
}

Tensor std(const Tensor& a, std::vector<int> dims, bool keepdim, int correction) {
  const Tensor v = var(a, std::move(dims), keepdim, correction);
  Tensor out = sqrt(v.detach());
  if (!v.requires_grad() || !autograd::grad_mode_enabled()) return out;
  const autograd::SavedTensor saved(out);
  return autograd::record("std", std::move(out), {&v},
                          [saved](const Tensor& g) { return std::vector<Tensor>{std_backward(g, saved.get("std"))}; });
}

// d sqrt(v) = g / (2 sqrt(v)), and 0 where the deviation is 0 (torch's choice, not inf * 0).
Tensor tensor_detail::std_backward(const Tensor& g, const Tensor& s) {
  const Tensor d = div(g, mul(s, 2.0));
  return where(eq(s, 0), zeros_like(d), d);
}

namespace {

// The extreme values of `a` along `at` (n elements) and their indices, with `at` kept as 1.
std::pair<Tensor, Tensor> extreme_on_cpu(const Tensor& a, int at, std::int64_t n, bool largest) {
  // Move `at` last and walk rows, F32, F64 and I64 as they are, other dtypes through F64 or I64.
  std::vector<int> order;
  for (int i = 0; i < a.dim(); ++i)
    if (i != at) order.push_back(i);
  if (a.dim()) order.push_back(at);
  const DType dt = a.dtype();
  const bool native = dt == DType::F32 || dt == DType::F64 || dt == DType::I64;
  const Tensor permuted = a.dim() ? a.detach().permute(order) : a.detach();
  const Tensor moved = dense(native ? permuted : permuted.to(is_floating(dt) ? DType::F64 : DType::I64));
  const std::int64_t rows = moved.numel() / n;
  Shape out_shape = a.shape();
  if (a.dim()) out_shape[static_cast<std::size_t>(at)] = 1;
  Tensor indices = Tensor::empty(DType::I64, out_shape);
  Tensor values = Tensor::empty(dt, out_shape);
  const auto find = [&]<class C>() {
    const C* p = reinterpret_cast<const C*>(moved.raw_data());
    std::int64_t* idx = indices.data<std::int64_t>();
    const auto elem = static_cast<std::int64_t>(values.element_size());
    parallel_range(rows, n, [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r) {
        const C* row = p + r * n;
        std::int64_t best = 0;
        for (std::int64_t i = 1; i < n; ++i) {
          const C v = row[i], b = row[best];
          if (b != b) break;  // NaN wins, as in PyTorch
          if (v != v || (largest ? v > b : v < b)) best = i;
        }
        idx[r] = best;
        store(dt, values.raw_data() + r * elem, row[best]);
      }
    });
  };
  switch (moved.dtype()) {
    case DType::F32: find.template operator()<float>(); break;
    case DType::F64: find.template operator()<double>(); break;
    default: find.template operator()<std::int64_t>(); break;
  }
  return {values, indices};
}

std::pair<Tensor, Tensor> extreme(const char* op, const Tensor& a, int dim, bool keepdim, bool largest) {
  const int at = wrap_dim(dim, a.dim(), op);
  const std::int64_t n = a.dim() ? a.shape()[static_cast<std::size_t>(at)] : 1;
  if (n == 0) throw IndexError(str(op, ": dim ", at, " of shape ", shape_to_string(a.shape()), " is empty"));
  auto [values, indices] = on_device(a) ? device_extreme(a.detach(), at, largest) : extreme_on_cpu(a, at, n, largest);
  if (!keepdim && a.dim()) {
    values = values.squeeze(at);
    indices = indices.squeeze(at);
  }
  if (!autograd::any_requires_grad({&a})) return {values, indices};
  const Shape from = a.shape();
  values = autograd::record(op, values, {&a}, [from, at, indices = indices, keepdim](const Tensor& g) {
    return std::vector<Tensor>{value_selecting_reduction_backward(g, at, indices, from, keepdim)};
  });
  return {values, indices};
}

}  // namespace

Tensor tensor_detail::value_selecting_reduction_backward(const Tensor& g, int dim, const Tensor& indices,
                                                         const Shape& input_shape, bool keepdim) {
  const char* op = "value_selecting_reduction_backward";
  const int rank = static_cast<int>(input_shape.size());
  const int at = wrap_dim(dim, rank, op);
  const bool kept = keepdim || rank == 0;
  const Tensor kept_indices = kept ? indices : indices.unsqueeze(at);
  const Tensor gk = kept ? g : g.unsqueeze(at);
  Shape want = input_shape;
  if (rank) want[static_cast<std::size_t>(at)] = 1;
  if (indices.dtype() != DType::I64 || kept_indices.shape() != want || gk.shape() != want)
    throw ValueError(str(op, ": expected I64 indices and a gradient of shape ", shape_to_string(want),
                         " (keepdim) for an input of shape ", shape_to_string(input_shape), ", got ",
                         dtype_name(indices.dtype()), " indices of shape ", shape_to_string(indices.shape()),
                         " and a gradient of shape ", shape_to_string(g.shape())));
  const std::int64_t n = rank ? input_shape[static_cast<std::size_t>(at)] : 1;
  Tensor grad = Tensor::zeros(g.dtype(), input_shape);
  // Scatter each row's gradient to its chosen index.
  const Tensor gc = gk.contiguous();
  const Tensor ic = kept_indices.contiguous();
  const std::int64_t* idx = ic.data<std::int64_t>();
  const Shape& s = kept_indices.shape();
  std::vector<std::int64_t> index(s.size(), 0);
  for (std::int64_t k = 0; k < kept_indices.numel(); ++k) {
    if (idx[k] < 0 || idx[k] >= n) throw IndexError(str(op, ": index ", idx[k], " out of range for a dim of ", n));
    std::int64_t offset = 0;
    for (std::size_t d = 0; d < s.size(); ++d)
      offset += (static_cast<int>(d) == at ? idx[k] : index[d]) * grad.strides()[d];
    store(g.dtype(), grad.raw_data() + offset * static_cast<std::int64_t>(grad.element_size()), gc.value_as_double(k));
    for (std::size_t d = s.size(); d-- > 0;) {
      if (++index[d] < s[d]) break;
      index[d] = 0;
    }
  }
  return grad;
}

std::pair<Tensor, Tensor> max(const Tensor& a, int dim, bool keepdim) { return extreme("max", a, dim, keepdim, true); }
std::pair<Tensor, Tensor> min(const Tensor& a, int dim, bool keepdim) { return extreme("min", a, dim, keepdim, false); }
namespace {

// The whole-tensor max or min: its gradient is shared evenly by every element equal to it (or
// every NaN, when it is NaN), as torch's evenly_distribute_backward.
Tensor whole_extreme(const char* op, const Tensor& a, bool largest) {
  if (a.numel() == 0) throw IndexError(str(op, ": the tensor is empty"));
  const Tensor value = extreme(op, a.detach().reshape({a.numel()}), 0, false, largest).first;
  if (!autograd::any_requires_grad({&a})) return value;
  autograd::SavedTensor sx(a);
  return autograd::record(op, value, {&a}, [sx, value, op](const Tensor& g) {
    return std::vector<Tensor>{evenly_distribute_backward(g, sx.get(op), value)};
  });
}

}  // namespace

Tensor max(const Tensor& a) { return whole_extreme("max", a, true); }
Tensor min(const Tensor& a) { return whole_extreme("min", a, false); }

Tensor tensor_detail::evenly_distribute_backward(const Tensor& g, const Tensor& x, const Tensor& value) {
  if (g.numel() != 1 || value.numel() != 1)
    throw ValueError(str("evenly_distribute_backward: expected a one-element gradient and value, got shapes ",
                         shape_to_string(g.shape()), " and ", shape_to_string(value.shape())));
  const double v = value.value_as_double(0);
  const Tensor chosen = (v != v ? ne(x, x) : eq(x, full({}, v, DType::F64))).to(g.dtype());  // (x's shape)
  return mul(chosen, div(g.reshape({}), sum(chosen)));
}
Tensor argmax(const Tensor& a, int dim, bool keepdim) { return extreme("argmax", a.detach(), dim, keepdim, true).second; }
Tensor argmin(const Tensor& a, int dim, bool keepdim) { return extreme("argmin", a.detach(), dim, keepdim, false).second; }
Tensor argmax(const Tensor& a) {
  if (a.numel() == 0) throw IndexError("argmax: the tensor is empty");
  return extreme("argmax", a.detach().reshape({a.numel()}), 0, false, true).second;
}

// Whether every / some element over `dims` is nonzero (NaN counts as nonzero, as in torch):
// a count of the zeros (or nonzeros) in the sum's order, compared with 0.
Tensor all(const Tensor& a, std::vector<int> dims, bool keepdim) {
  const std::vector<bool> reduce = reduced_dims("all", a, dims);
  const Tensor zeros = sum_raw(eq(a.detach(), 0), reduce, DType::I64).reshape(kept_shape(a, reduce, keepdim));
  return eq(zeros, 0).to(a.dtype() == DType::U8 ? DType::U8 : DType::BOOL);
}

Tensor any(const Tensor& a, std::vector<int> dims, bool keepdim) {
  const std::vector<bool> reduce = reduced_dims("any", a, dims);
  const Tensor nonzeros = sum_raw(ne(a.detach(), 0), reduce, DType::I64).reshape(kept_shape(a, reduce, keepdim));
  return gt(nonzeros, 0).to(a.dtype() == DType::U8 ? DType::U8 : DType::BOOL);
}

}  // namespace kael
