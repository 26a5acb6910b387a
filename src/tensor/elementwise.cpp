// Elementwise ops: broadcasting, type promotion, and their gradients.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "kernels/binary_arith.hpp"
#include "kernels/unary_arith.hpp"
#include "kernels/dispatch/kernel_table.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/family/scalar_math.hpp"
#include "tensor/backward.hpp"
#include "tensor/device_elementwise.hpp"
#include "tensor/parallel.hpp"
#include "tensor/strided.hpp"

namespace kael {

using namespace tensor_detail;

namespace tensor_detail {

std::vector<std::int64_t> broadcast_byte_strides(const Tensor& t, const Shape& shape) {
  std::vector<std::int64_t> strides(shape.size(), 0);
  const std::size_t offset = shape.size() - t.shape().size();
  const auto elem = static_cast<std::int64_t>(t.element_size());
  for (std::size_t i = 0; i < t.shape().size(); ++i)
    if (t.shape()[i] != 1) strides[offset + i] = t.strides()[i] * elem;
  return strides;
}

int wrap_dim(int dim, int rank, const char* op) {
  const int extent = rank == 0 ? 1 : rank;  // a 0-D tensor accepts dim 0 and -1, as PyTorch
  if (dim < -extent || dim >= extent)
    throw IndexError(str(op, ": dim ", dim, " out of range for a ", rank, "-D tensor (expected in [", -extent, ", ",
                         extent - 1, "])"));
  return dim < 0 ? dim + extent : dim;
}

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.shape() == shape) return grad;
  std::vector<int> dims;
  const int lead = grad.dim() - static_cast<int>(shape.size());
  for (int i = 0; i < grad.dim(); ++i)
    if (i < lead || (shape[static_cast<std::size_t>(i - lead)] == 1 && grad.shape()[static_cast<std::size_t>(i)] != 1))
      dims.push_back(i);
  Tensor reduced = dims.empty() ? grad : sum(grad, dims, true);
  return reduced.reshape(shape);
}

}  // namespace tensor_detail

bool is_integral(DType dtype, bool include_bool) {
  if (dtype == DType::BOOL) return include_bool;
  return !is_floating(dtype);
}

namespace {

int float_rank(DType d) {
  switch (d) {
    case DType::F16: return 1;
    case DType::BF16: return 1;
    case DType::F32: return 2;
    case DType::F64: return 3;
    default: return 0;
  }
}

// The dtype an elementwise result takes from a tensor and a scalar (PyTorch: a scalar decides
// only the category, never the width).
DType promote_with_scalar(DType t, const Scalar& s) {
  if (is_floating(t)) return t;
  if (!s.integral) return DType::F32;
  if (t == DType::BOOL) return DType::I64;
  return t;
}

Tensor scalar_tensor(const Scalar& s, DType dtype) {
  Tensor t = Tensor::empty(dtype, {});
  store(dtype, t.raw_data(), s.value);
  return t;
}

// The layout of an elementwise op over `shape`: the (new, contiguous) output first, then the
// inputs broadcast to it.
template <std::size_t N>
Layout<N + 1> operands_layout(const Tensor& out, const Shape& shape, const Tensor* const (&inputs)[N]) {
  std::vector<std::int64_t> strides[N + 1] = {broadcast_byte_strides(out, shape)};
  for (std::size_t k = 0; k < N; ++k) strides[k + 1] = broadcast_byte_strides(*inputs[k], shape);
  return coalesce(shape, strides);
}

// Elements per block of a strided input gathered before a row kernel: the block stays in L1.
constexpr std::int64_t kGatherBlock = 256;

// out = f(a, b) elementwise over the broadcast shape, computed in `compute`, stored as
// `out_dtype`; `work` is the cost of one element in the thread pool's units. The rows of the
// coalesced layout are threaded by ranges of elements (parallel_walk); all-F32 operands read
// typed pointers, with an input's step of 0 or 1 element fixed at compile time so that the
// loop vectorizes, and any other mix goes through load/store in `compute`. Each element is
// computed alone, so neither the layout nor the thread split changes a bit.
template <class F>
Tensor binary_kernel(const char* op, const Tensor& a, const Tensor& b, DType compute, DType out_dtype, F f,
                     std::int64_t work = 1) {
  if (on_device(a, b)) refuse_on_device(op, a, b);  // the ops with a device kernel call it before this
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor out = Tensor::empty(out_dtype, shape);
  const Tensor* const inputs[2] = {&a, &b};
  const Layout<3> layout = operands_layout(out, shape, inputs);
  // Byte steps along a row (the output's is its element size: it is contiguous).
  const std::int64_t step_o = layout.shape.empty() ? 0 : layout.strides[0].back();
  const std::int64_t step_a = layout.shape.empty() ? 0 : layout.strides[1].back();
  const std::int64_t step_b = layout.shape.empty() ? 0 : layout.strides[2].back();
  std::byte* po = out.raw_data();
  const std::byte* pa = a.raw_data();
  const std::byte* pb = b.raw_data();
  if (compute == DType::F32 && a.dtype() == DType::F32 && b.dtype() == DType::F32 && out_dtype == DType::F32) {
    const auto rows = [&]<std::int64_t StepA, std::int64_t StepB>() {
      parallel_walk(layout, out.numel(), work, [&](const std::int64_t* o, std::int64_t count) {
        float* y = reinterpret_cast<float*>(po + o[0]);
        const float* x0 = reinterpret_cast<const float*>(pa + o[1]);
        const float* x1 = reinterpret_cast<const float*>(pb + o[2]);
        // StepA/StepB of -1: the row's own stride, in elements.
        const std::int64_t sa = StepA >= 0 ? StepA : step_a / 4, sb = StepB >= 0 ? StepB : step_b / 4;
        for (std::int64_t i = 0; i < count; ++i) y[i] = static_cast<float>(f(x0[i * sa], x1[i * sb]));
      });
    };
    const auto steps = [](std::int64_t step) { return step == 4 ? 1 : step == 0 ? 0 : -1; };
    const int ka = steps(step_a), kb = steps(step_b);
    if (ka == 1 && kb == 1) rows.template operator()<1, 1>();
    else if (ka == 1 && kb == 0) rows.template operator()<1, 0>();
    else if (ka == 0 && kb == 1) rows.template operator()<0, 1>();
    else rows.template operator()<-1, -1>();
    return out;
  }
  const DType da = a.dtype(), db = b.dtype();
  dispatch(compute, [&]<class C>() {
    parallel_walk(layout, out.numel(), work, [&](const std::int64_t* o, std::int64_t count) {
      for (std::int64_t i = 0; i < count; ++i)
        store(out_dtype, po + o[0] + i * step_o,
              f(load<C>(da, pa + o[1] + i * step_a), load<C>(db, pb + o[2] + i * step_b)));
    });
  });
  return out;
}

// A vectorized form of an F32 function, for unary_kernel: out (n) = f(inp (n)), out may not
// equal inp.
using F32Rows = void (*)(float* out, const float* inp, std::int64_t n);

// out = f(a) elementwise, threaded by ranges as binary_kernel. An F32 input and output go
// through `rows` where given (on runs of the input copied together where they are strided),
// else through f on typed pointers.
template <class F>
Tensor unary_kernel(const Tensor& a, DType compute, DType out_dtype, F f, std::int64_t work = 1,
                    F32Rows rows = nullptr) {
  Tensor out = Tensor::empty(out_dtype, a.shape());
  const Tensor* const inputs[1] = {&a};
  const Layout<2> layout = operands_layout(out, a.shape(), inputs);
  const std::int64_t step_o = layout.shape.empty() ? 0 : layout.strides[0].back();
  const std::int64_t step_a = layout.shape.empty() ? 0 : layout.strides[1].back();
  std::byte* po = out.raw_data();
  const std::byte* pa = a.raw_data();
  if (a.dtype() == DType::F32 && out_dtype == DType::F32) {
    const std::int64_t sa = step_a / 4;
    parallel_walk(layout, out.numel(), work, [&](const std::int64_t* o, std::int64_t count) {
      float* y = reinterpret_cast<float*>(po + o[0]);
      const float* x = reinterpret_cast<const float*>(pa + o[1]);
      if (rows != nullptr && sa == 1) {
        rows(y, x, count);
      } else if (rows != nullptr) {
        // A strided input is gathered into the output a block at a time, then computed in place.
        for (std::int64_t i0 = 0; i0 < count; i0 += kGatherBlock) {
          const std::int64_t m = std::min(kGatherBlock, count - i0);
          for (std::int64_t i = 0; i < m; ++i) y[i0 + i] = x[(i0 + i) * sa];
          rows(y + i0, y + i0, m);
        }
      } else if (sa == 1) {
        for (std::int64_t i = 0; i < count; ++i) y[i] = static_cast<float>(f(x[i]));
      } else {
        for (std::int64_t i = 0; i < count; ++i) y[i] = static_cast<float>(f(x[i * sa]));
      }
    });
    return out;
  }
  const DType da = a.dtype();
  dispatch(compute, [&]<class C>() {
    parallel_walk(layout, out.numel(), work, [&](const std::int64_t* o, std::int64_t count) {
      for (std::int64_t i = 0; i < count; ++i) store(out_dtype, po + o[0] + i * step_o, f(load<C>(da, pa + o[1] + i * step_a)));
    });
  });
  return out;
}

// Thread-pool units per element of the C library's transcendental functions (log, erf, ...): a few
// tens of flops, so far fewer elements are worth a thread than for an add.
constexpr std::int64_t kMathWork = 16;

// The type a floating function computes in (the integer instantiations are never run: such
// inputs are computed as F32, but every branch of dispatch is compiled).
template <class T>
using FloatOf = std::conditional_t<std::is_floating_point_v<T>, T, float>;

// The floating dtype a math function (exp, log, ...) returns for `a`.
DType float_result(DType d) { return is_floating(d) ? d : DType::F32; }

void require_not_bool(const char* op, const Tensor& a) {
  if (a.dtype() == DType::BOOL) throw TypeError(str(op, ": not defined for BOOL tensors"));
}

}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  const int fa = float_rank(a), fb = float_rank(b);
  if (fa || fb) {
    if (fa == fb) return DType::F32;  // F16 with BF16
    return fa > fb ? a : b;
  }
  if (a == DType::BOOL) return b;
  if (b == DType::BOOL) return a;
  const bool signed_a = a == DType::I8 || a == DType::I16 || a == DType::I32 || a == DType::I64;
  const bool signed_b = b == DType::I8 || b == DType::I16 || b == DType::I32 || b == DType::I64;
  if (signed_a == signed_b) return dtype_size(a) >= dtype_size(b) ? a : b;
  // Mixed signedness: a signed type wide enough for both, capped at I64.
  const std::size_t width = std::max(dtype_size(signed_a ? b : a) * 2, dtype_size(signed_a ? a : b));
  return width >= 8 ? DType::I64 : width >= 4 ? DType::I32 : DType::I16;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  Shape out(std::max(a.size(), b.size()));
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::int64_t da = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
    const std::int64_t db = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
    if (da != db && da != 1 && db != 1)
      throw ValueError(str(op, ": shapes ", shape_to_string(a), " and ", shape_to_string(b),
                           " cannot be broadcast (dim ", i, ": ", da, " vs ", db, ")"));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) {
  const DType dt = promote_types(a.dtype(), b.dtype());
  const double al = alpha.value;
  Tensor out = on_device(a, b) ? device_binary("add", kernels::arith::Binary::add, a, b, al)
               : al == 1.0   ? binary_kernel("add", a, b, dt, dt, [](auto x, auto y) { return kernels::arith::add(x, y); })
                             : binary_kernel("add", a, b, dt, dt, [al](auto x, auto y) {
                                 using C = decltype(x);
                                 return kernels::arith::add_scaled(x, y, static_cast<C>(al));
                               });
  const Shape sa = a.shape(), sb = b.shape();
  return autograd::record("add", std::move(out), {&a, &b},
                          [sa, sb, al](const Tensor& g) { return add_backward(g, sa, sb, al); });
}

std::vector<Tensor> tensor_detail::add_backward(const Tensor& g, const Shape& a_shape, const Shape& b_shape,
                                                double alpha) {
  return {sum_to(g, a_shape), sum_to(alpha == 1.0 ? g : mul(g, alpha), b_shape)};
}

namespace {
// -s, integral when s is (so int64 - 1 stays int64).
Scalar negated(Scalar s) {
  s.value = -s.value;
  return s;
}
}  // namespace

Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha) {
  if (a.dtype() == DType::BOOL && b.dtype() == DType::BOOL)
    throw TypeError("sub: subtracting two BOOL tensors is not supported; use logical_xor");
  return add(a, b, negated(alpha));
}

Tensor mul(const Tensor& a, const Tensor& b) {
  const DType dt = promote_types(a.dtype(), b.dtype());
  Tensor out = on_device(a, b) ? device_binary("mul", kernels::arith::Binary::mul, a, b)
                               : binary_kernel("mul", a, b, dt, dt, [](auto x, auto y) { return kernels::arith::mul(x, y); });
  const bool need = autograd::any_requires_grad({&a, &b});
  if (!need) return out;
  // Each operand is saved only where the other's gradient needs it (as torch): y = x * 2 keeps
  // no x, so writing x in place afterwards leaves this backward valid.
  const bool ga = a.requires_grad(), gb = b.requires_grad();
  autograd::SavedTensor sa(gb ? a : Tensor()), sb(ga ? b : Tensor());
  const Shape shape_a = a.shape(), shape_b = b.shape();
  return autograd::record("mul", std::move(out), {&a, &b}, [sa, sb, ga, gb, shape_a, shape_b](const Tensor& g) {
    return mul_backward(g, gb ? sa.get("mul") : Tensor(), ga ? sb.get("mul") : Tensor(), shape_a, shape_b, ga, gb);
  });
}

std::vector<Tensor> tensor_detail::mul_backward(const Tensor& g, const Tensor& a, const Tensor& b, const Shape& a_shape,
                                                const Shape& b_shape, bool need_a, bool need_b) {
  return {need_a ? sum_to(mul(g, b), a_shape) : Tensor(), need_b ? sum_to(mul(g, a), b_shape) : Tensor()};
}

Tensor div(const Tensor& a, const Tensor& b) {
  DType dt = promote_types(a.dtype(), b.dtype());
  if (!is_floating(dt)) dt = DType::F32;  // true division
  Tensor out = on_device(a, b) ? device_binary("div", kernels::arith::Binary::div, a, b)
                               : binary_kernel("div", a, b, dt, dt, [](auto x, auto y) { return kernels::arith::div(x, y); });
  if (!autograd::any_requires_grad({&a, &b})) return out;
  const bool ga = a.requires_grad(), gb = b.requires_grad();
  autograd::SavedTensor sa(gb ? a : Tensor()), sb(b);  // a only for b's gradient, as mul
  const Shape shape_a = a.shape();
  return autograd::record("div", std::move(out), {&a, &b}, [sa, sb, ga, gb, shape_a](const Tensor& g) {
    return div_backward(g, gb ? sa.get("div") : Tensor(), sb.get("div"), shape_a, ga, gb);
  });
}

std::vector<Tensor> tensor_detail::div_backward(const Tensor& g, const Tensor& a, const Tensor& b, const Shape& a_shape,
                                                bool need_a, bool need_b) {
  return {need_a ? sum_to(div(g, b), a_shape) : Tensor(),
          need_b ? sum_to(neg(div(mul(g, a), mul(b, b))), b.shape()) : Tensor()};
}

Tensor add(const Tensor& a, Scalar b) { return add(a, scalar_tensor(b, promote_with_scalar(a.dtype(), b))); }
Tensor sub(const Tensor& a, Scalar b) { return add(a, negated(b)); }
Tensor mul(const Tensor& a, Scalar b) { return mul(a, scalar_tensor(b, promote_with_scalar(a.dtype(), b))); }
Tensor div(const Tensor& a, Scalar b) {
  DType dt = promote_with_scalar(a.dtype(), b);
  return div(a, scalar_tensor(b, is_floating(dt) ? dt : DType::F32));
}
Tensor operator/(Scalar a, const Tensor& b) { return div(full_like(b, a).to(promote_with_scalar(b.dtype(), a)), b); }

Tensor pow(const Tensor& a, Scalar exponent) {
  const DType dt = promote_with_scalar(a.dtype(), exponent);
  const double e = exponent.value;
  Tensor out = on_device(a) ? device_binary("pow", kernels::arith::Binary::pow, a, scalar_tensor(exponent, dt))
                            : unary_kernel(a, dt, dt, [e](auto x) {
                                using C = decltype(x);
                                if constexpr (std::is_floating_point_v<C>) return static_cast<C>(std::pow(x, static_cast<C>(e)));
                                else return static_cast<C>(std::llround(std::pow(static_cast<double>(x), e)));
                              });
  if (!autograd::any_requires_grad({&a})) return out;
  autograd::SavedTensor sa(a);
  return autograd::record("pow", std::move(out), {&a}, [sa, e](const Tensor& g) {
    return std::vector<Tensor>{pow_backward(g, sa.get("pow"), e)};
  });
}

Tensor tensor_detail::pow_backward(const Tensor& g, const Tensor& a, double exponent) {
  return exponent == 0.0 ? zeros_like(a) : mul(g, mul(pow(a, exponent - 1.0), exponent));
}

Tensor pow(const Tensor& a, const Tensor& exponent) {
  DType dt = promote_types(a.dtype(), exponent.dtype());
  if (!is_floating(dt)) dt = DType::F32;
  Tensor out = on_device(a, exponent) ? device_binary("pow", kernels::arith::Binary::pow, a, exponent)
                                      : binary_kernel("pow", a, exponent, dt, dt, [](auto x, auto y) {
                                          using C = decltype(x);
                                          if constexpr (std::is_floating_point_v<C>) return static_cast<C>(std::pow(x, y));
                                          else return static_cast<C>(std::pow(static_cast<double>(x), static_cast<double>(y)));
                                        });
  if (!autograd::any_requires_grad({&a, &exponent})) return out;
  autograd::SavedTensor sa(a), se(exponent), so(out);
  const bool ga = a.requires_grad(), ge = exponent.requires_grad();
  return autograd::record("pow", std::move(out), {&a, &exponent}, [sa, se, so, ga, ge](const Tensor& g) {
    return pow_backward(g, sa.get("pow"), se.get("pow"), ge ? so.get("pow") : Tensor(), ga, ge);
  });
}

std::vector<Tensor> tensor_detail::pow_backward(const Tensor& g, const Tensor& a, const Tensor& exponent,
                                                const Tensor& y, bool need_a, bool need_exponent) {
  return {need_a ? sum_to(mul(g, mul(exponent, pow(a, sub(exponent, 1)))), a.shape()) : Tensor(),
          need_exponent ? sum_to(mul(g, mul(y, log(a))), exponent.shape()) : Tensor()};
}

namespace {
Tensor pick(const char* op, const Tensor& a, const Tensor& b, bool larger) {
  const DType dt = promote_types(a.dtype(), b.dtype());
  using kernels::arith::Binary;
  Tensor out = on_device(a, b) ? device_binary(op, larger ? Binary::maximum : Binary::minimum, a, b)
               : binary_kernel(op, a, b, dt, dt, [larger](auto x, auto y) {
                   return larger ? kernels::arith::maximum(x, y) : kernels::arith::minimum(x, y);
                 });
  if (!autograd::any_requires_grad({&a, &b})) return out;
  autograd::SavedTensor sa(a), sb(b);
  return autograd::record(op, std::move(out), {&a, &b}, [sa, sb, larger, op](const Tensor& g) {
    return larger ? maximum_backward(g, sa.get(op), sb.get(op)) : minimum_backward(g, sa.get(op), sb.get(op));
  });
}

// maximum's and minimum's rule: a's share of g is 1 where it won, 1/2 at a tie (as PyTorch's
// maximum splits it), 0 elsewhere; b takes the rest.
std::vector<Tensor> extremum_backward(const Tensor& g, const Tensor& a, const Tensor& b, bool larger) {
  const Tensor a_wins = (larger ? gt(a, b) : lt(a, b)).to(g.dtype());
  const Tensor tie = mul(eq(a, b).to(g.dtype()), 0.5);
  const Tensor share = add(a_wins, tie);
  return {sum_to(mul(g, share), a.shape()), sum_to(mul(g, sub(ones_like(share), share)), b.shape())};
}
}  // namespace

std::vector<Tensor> tensor_detail::maximum_backward(const Tensor& g, const Tensor& a, const Tensor& b) {
  return extremum_backward(g, a, b, true);
}

std::vector<Tensor> tensor_detail::minimum_backward(const Tensor& g, const Tensor& a, const Tensor& b) {
  return extremum_backward(g, a, b, false);
}

Tensor maximum(const Tensor& a, const Tensor& b) { return pick("maximum", a, b, true); }
Tensor minimum(const Tensor& a, const Tensor& b) { return pick("minimum", a, b, false); }

Tensor neg(const Tensor& a) {
  require_not_bool("neg", a);
  Tensor out = on_device(a) ? device_unary("neg", kernels::arith::Unary::neg, a)
                            : unary_kernel(a, a.dtype(), a.dtype(), [](auto x) { return kernels::arith::neg(x); });
  return autograd::record("neg", std::move(out), {&a},
                          [](const Tensor& g) { return std::vector<Tensor>{neg_backward(g)}; });
}

Tensor tensor_detail::neg_backward(const Tensor& g) { return neg(g); }

Tensor abs(const Tensor& a) {
  Tensor out = on_device(a) ? device_unary("abs", kernels::arith::Unary::abs, a)
                            : unary_kernel(a, a.dtype(), a.dtype(), [](auto x) { return kernels::arith::abs(x); });
  if (!autograd::any_requires_grad({&a})) return out;
  autograd::SavedTensor sa(a);
  return autograd::record("abs", std::move(out), {&a},
                          [sa](const Tensor& g) { return std::vector<Tensor>{abs_backward(g, sa.get("abs"))}; });
}

Tensor tensor_detail::abs_backward(const Tensor& g, const Tensor& x) {
  const Tensor sign = sub(gt(x, 0).to(g.dtype()), lt(x, 0).to(g.dtype()));
  return mul(g, sign);
}

namespace {

// The kernel table's vector exp and the functions on it (kernels/exp.hpp): the C library's
// semantics (NaN, infinities, overflow to inf, subnormal results), within 1-2 ulp of the
// correctly rounded value.
void exp_rows(float* out, const float* inp, std::int64_t n) { kernels::active_kernels().exp(out, inp, n); }
void sigmoid_rows(float* out, const float* inp, std::int64_t n) { kernels::active_kernels().sigmoid(out, inp, n); }
void tanh_rows(float* out, const float* inp, std::int64_t n) { kernels::active_kernels().tanh(out, inp, n); }

// Thread-pool units per element of exp_rows: a dozen vector operations for 8 or 16 elements.
constexpr std::int64_t kVectorMathWork = 4;

}  // namespace

// A floating function of one tensor and its named backward rule, name##_backward, whose
// derivative grad_expr is given from the gradient g, the input x and the output y; `rows` its
// F32 vector form, or nullptr.
#define KAEL_FLOAT_UNARY(name, expr, grad_expr, rows, work)                                      \
  Tensor name(const Tensor& a) {                                                                 \
    const DType dt = float_result(a.dtype());                                                    \
    Tensor out = on_device(a) ? device_unary(#name, kernels::arith::Unary::name, a)              \
                              : unary_kernel(a, dt, dt, [](auto x) {                             \
                                  using C = FloatOf<decltype(x)>;                                \
                                  return static_cast<C>(expr);                                   \
                                }, work, rows);                                                  \
    if (!autograd::any_requires_grad({&a})) return out;                                          \
    autograd::SavedTensor sx(a), sy(out);                                                        \
    return autograd::record(#name, std::move(out), {&a}, [sx, sy](const Tensor& g) {             \
      return std::vector<Tensor>{name##_backward(g, sx.get(#name), sy.get(#name))};              \
    });                                                                                          \
  }                                                                                              \
  Tensor tensor_detail::name##_backward(const Tensor& g, [[maybe_unused]] const Tensor& x,       \
                                        [[maybe_unused]] const Tensor& y) {                      \
    return grad_expr;                                                                            \
  }

KAEL_FLOAT_UNARY(exp, std::exp(x), mul(g, y), exp_rows, kVectorMathWork)
KAEL_FLOAT_UNARY(log, std::log(x), div(g, x), nullptr, kMathWork)
KAEL_FLOAT_UNARY(sqrt, std::sqrt(x), div(g, mul(y, 2)), nullptr, kMathWork)
KAEL_FLOAT_UNARY(rsqrt, C(1) / std::sqrt(x), mul(g, mul(pow(y, 3), -0.5)), nullptr, kMathWork)
KAEL_FLOAT_UNARY(tanh, std::tanh(x), mul(g, sub(ones_like(y), mul(y, y))), tanh_rows, kVectorMathWork)
KAEL_FLOAT_UNARY(sin, std::sin(x), mul(g, cos(x)), nullptr, kMathWork)
KAEL_FLOAT_UNARY(cos, std::cos(x), mul(g, neg(sin(x))), nullptr, kMathWork)
KAEL_FLOAT_UNARY(sigmoid, C(1) / (C(1) + std::exp(-x)), mul(g, mul(y, sub(ones_like(y), y))), sigmoid_rows,
                 kVectorMathWork)
#undef KAEL_FLOAT_UNARY

// relu and its gradient as torch's clamp_min(x, 0) and threshold_backward: x < 0 gives 0, so a
// NaN and -0.0 pass through unchanged; the gradient is 0 where the output is <= 0 (at 0 too)
// and g elsewhere (a NaN output passes g), a select, so an infinite g where the output is 0
// still gives 0. Each one pass of the elementwise kernels.
Tensor relu(const Tensor& a) {
  require_not_bool("relu", a);
  Tensor out = on_device(a) ? device_unary("relu", kernels::arith::Unary::relu, a)
                            : unary_kernel(a, a.dtype(), a.dtype(), [](auto x) { return kernels::arith::relu(x); });
  if (!autograd::any_requires_grad({&a})) return out;
  autograd::SavedTensor sy(out);
  return autograd::record("relu", std::move(out), {&a}, [sy](const Tensor& g) {
    return std::vector<Tensor>{relu_backward(g, sy.get("relu"))};
  });
}

Tensor tensor_detail::relu_backward(const Tensor& g, const Tensor& y) {
  if (on_device(g, y)) return where(le(y, 0.0), zeros_like(g), g);  // the same select, of two kernels
  return binary_kernel("relu_backward", g, y, g.dtype(), g.dtype(), [](auto grad, auto out) {
    return out <= decltype(out){} ? decltype(grad){} : grad;
  });
}

namespace {

// GELU's tanh form on F32 rows: the kernel table's, as the engine's.
void gelu_tanh_rows(float* out, const float* inp, std::int64_t n) { kernels::active_kernels().gelu_new(out, inp, n); }

// The exact form's rules, on the compute type C.
template <class C>
C gelu_erf(C x) {
  return static_cast<C>(C(0.5) * x * (C(1) + std::erf(x * C(0.7071067811865476))));
}

template <class C>
C gelu_erf_derivative(C x) {
  const C cdf = C(0.5) * (C(1) + std::erf(x * C(0.7071067811865476)));
  const C pdf = std::exp(C(-0.5) * x * x) * C(0.3989422804014327);
  return static_cast<C>(cdf + x * pdf);
}

// "none" or "tanh", else ValueError.
bool gelu_uses_tanh(const char* approximate) {
  const std::string mode = approximate;
  if (mode != "none" && mode != "tanh")
    throw ValueError(str("gelu: approximate must be \"none\" or \"tanh\", got \"", mode, "\""));
  return mode == "tanh";
}

}  // namespace

Tensor tensor_detail::gelu_backward(const Tensor& g, const Tensor& x, const char* approximate) {
  const bool use_tanh = gelu_uses_tanh(approximate);
  const DType dt = float_result(x.dtype());
  if (on_device(g, x)) {
    using kernels::arith::Unary;
    return mul(g, device_unary("gelu", use_tanh ? Unary::gelu_tanh_derivative : Unary::gelu_erf_derivative, x));
  }
  if (use_tanh && dt == DType::F32) {  // one pass of the kernel: g gelu'(x)
    const Tensor xd = dense(x.to(DType::F32)), gd = dense(g.to(DType::F32));
    Tensor dx = Tensor::empty(DType::F32, x.shape());
    kernels::gelu_backward(dx.data<float>(), xd.data<float>(), gd.data<float>(), x.numel());
    return dx;
  }
  if (dt == DType::F32 && x.dtype() == DType::F32 && g.dtype() == DType::F32 && g.shape() == x.shape()) {
    const Tensor xd = dense(x), gd = dense(g);
    Tensor dx = Tensor::empty(DType::F32, x.shape());
    float* out = dx.data<float>();
    const float *px = xd.data<float>(), *pg = gd.data<float>();
    parallel_range(x.numel(), kVectorMathWork, [&](std::int64_t begin, std::int64_t end) {
      kernels::gelu_erf_backward_rows(out + begin, px + begin, pg + begin, end - begin);
    });
    return dx;
  }
  const Tensor d = unary_kernel(x, dt, dt, [use_tanh](auto v) {
    using C = FloatOf<decltype(v)>;
    return use_tanh ? kernels::gelu_tanh_derivative(static_cast<C>(v)) : gelu_erf_derivative(static_cast<C>(v));
  }, kMathWork);
  return mul(g, d);
}

Tensor gelu(const Tensor& a, const char* approximate) {
  const bool use_tanh = gelu_uses_tanh(approximate);
  const DType dt = float_result(a.dtype());
  using kernels::arith::Unary;
  Tensor out = on_device(a) ? device_unary("gelu", use_tanh ? Unary::gelu_tanh : Unary::gelu_erf, a)
                            : unary_kernel(a, dt, dt, [use_tanh](auto x) {
                                using C = FloatOf<decltype(x)>;
                                return use_tanh ? kernels::gelu_tanh(static_cast<C>(x)) : gelu_erf(static_cast<C>(x));
                              }, kMathWork, use_tanh ? gelu_tanh_rows : kernels::gelu_erf_rows);
  if (!autograd::any_requires_grad({&a})) return out;
  autograd::SavedTensor sx(a);
  const std::string mode = approximate;
  return autograd::record("gelu", std::move(out), {&a}, [sx, mode](const Tensor& g) {
    return std::vector<Tensor>{gelu_backward(g, sx.get("gelu"), mode.c_str())};
  });
}

#define KAEL_COMPARE(name)                                                                       \
  Tensor name(const Tensor& a, const Tensor& b) {                                                \
    using kernels::arith::Compare;                                                               \
    if (on_device(a, b)) return device_compare(#name, Compare::name, a, b);                      \
    const DType dt = promote_types(a.dtype(), b.dtype());                                        \
    return binary_kernel(#name, a, b, dt, DType::BOOL,                                           \
                         [](auto x, auto y) { return kernels::arith::compare(Compare::name, x, y); }); \
  }
KAEL_COMPARE(eq)
KAEL_COMPARE(ne)
KAEL_COMPARE(lt)
KAEL_COMPARE(le)
KAEL_COMPARE(gt)
KAEL_COMPARE(ge)
#undef KAEL_COMPARE

// The scalar becomes a 0-D tensor of the dtype the comparison computes in (1.5 against an
// integer tensor compares as F32, as PyTorch).
#define KAEL_COMPARE_SCALAR(name) \
  Tensor name(const Tensor& a, Scalar b) { return name(a, scalar_tensor(b, promote_with_scalar(a.dtype(), b))); }
KAEL_COMPARE_SCALAR(eq)
KAEL_COMPARE_SCALAR(ne)
KAEL_COMPARE_SCALAR(lt)
KAEL_COMPARE_SCALAR(le)
KAEL_COMPARE_SCALAR(gt)
KAEL_COMPARE_SCALAR(ge)
#undef KAEL_COMPARE_SCALAR

namespace {
Tensor where_on_cpu(const Tensor& condition, const Tensor& a, const Tensor& b) {
  const Shape shape = broadcast_shapes(broadcast_shapes(condition.shape(), a.shape(), "where"), b.shape(), "where");
  const DType dt = promote_types(a.dtype(), b.dtype());
  Tensor out = Tensor::empty(dt, shape);
  const Tensor* const inputs[3] = {&condition, &a, &b};
  const Layout<4> layout = operands_layout(out, shape, inputs);
  std::int64_t steps[4] = {};
  for (std::size_t k = 0; k < 4 && !layout.shape.empty(); ++k) steps[k] = layout.strides[k].back();
  std::byte* po = out.raw_data();
  const std::byte *pc = condition.raw_data(), *pa = a.raw_data(), *pb = b.raw_data();
  dispatch(dt, [&]<class C>() {
    parallel_walk(layout, out.numel(), 1, [&](const std::int64_t* o, std::int64_t count) {
      for (std::int64_t i = 0; i < count; ++i) {
        const bool c = load<bool>(DType::BOOL, pc + o[1] + i * steps[1]);
        store(dt, po + o[0] + i * steps[0],
              c ? load<C>(a.dtype(), pa + o[2] + i * steps[2]) : load<C>(b.dtype(), pb + o[3] + i * steps[3]));
      }
    });
  });
  return out;
}
}  // namespace

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  if (condition.dtype() != DType::BOOL)
    throw TypeError(str("where: condition must be BOOL, got ", dtype_name(condition.dtype())));
  Tensor out = on_device(condition) || on_device(a, b) ? device_where(condition, a, b) : where_on_cpu(condition, a, b);
  if (!autograd::any_requires_grad({&a, &b})) return out;
  const Tensor cond = condition.detach();
  const Shape sa = a.shape(), sb = b.shape();
  return autograd::record("where", std::move(out), {&a, &b},
                          [cond, sa, sb](const Tensor& g) { return where_backward(g, cond, sa, sb); });
}

std::vector<Tensor> tensor_detail::where_backward(const Tensor& g, const Tensor& condition, const Shape& a_shape,
                                                  const Shape& b_shape) {
  const Tensor zero = zeros_like(g);
  return {sum_to(where(condition, g, zero), a_shape), sum_to(where(condition, zero, g), b_shape)};
}

Tensor masked_fill(const Tensor& a, const Tensor& mask, Scalar value) {
  if (mask.dtype() != DType::BOOL) throw TypeError(str("masked_fill: mask must be BOOL, got ", dtype_name(mask.dtype())));
  const Shape shape = broadcast_shapes(a.shape(), mask.shape(), "masked_fill");
  if (shape != a.shape())
    throw ValueError(str("masked_fill: mask of shape ", shape_to_string(mask.shape()),
                         " does not broadcast to the tensor's shape ", shape_to_string(a.shape())));
  return where(mask, scalar_tensor(value, a.dtype()), a);
}

Tensor& masked_fill_(Tensor& a, const Tensor& mask, Scalar value) {
  return assign_in_place(a, "masked_fill_", [&](const Tensor& self) { return masked_fill(self, mask, value); });
}

Tensor clamp(const Tensor& a, std::optional<Scalar> min, std::optional<Scalar> max) {
  if (!min && !max) throw ValueError("clamp: at least one of min and max must be given");
  require_not_bool("clamp", a);
  DType dt = a.dtype();
  for (const auto& bound : {min, max})
    if (bound) dt = promote_types(dt, promote_with_scalar(a.dtype(), *bound));
  const double lo = min ? min->value : -std::numeric_limits<double>::infinity();
  const double hi = max ? max->value : std::numeric_limits<double>::infinity();
  // torch: x < lo gives lo, then x > hi gives hi (so hi wins when lo > hi); NaN stays NaN.
  Tensor out = unary_kernel(a, dt, dt, [lo, hi](auto x) {
    using C = decltype(x);
    if constexpr (std::is_floating_point_v<C>) {
      if (x != x) return x;
    }
    C y = static_cast<double>(x) < lo ? static_cast<C>(lo) : x;
    return static_cast<double>(y) > hi ? static_cast<C>(hi) : y;
  });
  if (!autograd::any_requires_grad({&a})) return out;
  autograd::SavedTensor sx(a);
  const std::optional<double> given_min = min ? std::optional<double>(min->value) : std::nullopt;
  const std::optional<double> given_max = max ? std::optional<double>(max->value) : std::nullopt;
  return autograd::record("clamp", std::move(out), {&a}, [sx, given_min, given_max](const Tensor& g) {
    return std::vector<Tensor>{clamp_backward(g, sx.get("clamp"), given_min, given_max)};
  });
}

Tensor tensor_detail::clamp_backward(const Tensor& g, const Tensor& x, std::optional<double> min,
                                     std::optional<double> max) {
  Tensor inside = ones_like(g);
  if (min) inside = mul(inside, gt(x, full({}, *min, DType::F64)).to(g.dtype()));
  if (max) inside = mul(inside, lt(x, full({}, *max, DType::F64)).to(g.dtype()));
  return mul(g, inside);
}

namespace {

// Python's floor division on C: integers round toward -inf, floats are floor(a / b). A zero
// integer divisor is refused before the kernels run (check_int_divisor).
template <class C>
C floor_div(C x, C y) {
  if constexpr (std::is_same_v<C, bool>) {  // never run: BOOL is refused first
    return x;
  } else if constexpr (std::is_floating_point_v<C>) {
    return std::floor(x / y);
  } else {
    if (y == 0) return C(0);
    const C q = x / y;
    return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;
  }
}

template <class C>
C python_mod(C x, C y) {
  if constexpr (std::is_same_v<C, bool>) {  // never run: BOOL is refused first
    return x && !y;
  } else if constexpr (std::is_floating_point_v<C>) {
    const C r = std::fmod(x, y);
    return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
  } else {
    if (y == 0) return C(0);
    const C r = x % y;
    return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
  }
}

// ValueError for an integer division by zero (torch's ZeroDivisionError), before any thread runs.
void check_int_divisor(const char* op, DType dt, const Tensor& b) {
  if (dt == DType::BOOL) throw TypeError(str(op, ": not defined for BOOL tensors"));
  if (!is_floating(dt) && b.numel() > 0 && max(eq(b, 0).to(DType::I64)).item<std::int64_t>() != 0)
    throw ValueError(str(op, ": integer division by zero"));
}

}  // namespace

Tensor floor_divide(const Tensor& a, const Tensor& b) {
  const DType dt = promote_types(a.dtype(), b.dtype());
  check_int_divisor("floor_divide", dt, b);
  Tensor out = binary_kernel("floor_divide", a, b, dt, dt, [](auto x, auto y) { return floor_div(x, y); });
  // As torch: the result takes part in the graph, and a backward through it is an error.
  return autograd::record("floor_divide", std::move(out), {&a, &b},
                          [](const Tensor& g) { return floor_divide_backward(g); });
}

std::vector<Tensor> tensor_detail::floor_divide_backward(const Tensor&) {
  throw ValueError("floor_divide: the derivative is not implemented (as torch's); detach() the operands");
}

Tensor floor_divide(const Tensor& a, Scalar b) { return floor_divide(a, scalar_tensor(b, promote_with_scalar(a.dtype(), b))); }

Tensor remainder(const Tensor& a, const Tensor& b) {
  const DType dt = promote_types(a.dtype(), b.dtype());
  check_int_divisor("remainder", dt, b);
  Tensor out = binary_kernel("remainder", a, b, dt, dt, [](auto x, auto y) { return python_mod(x, y); });
  if (!autograd::any_requires_grad({&a, &b})) return out;
  autograd::SavedTensor sa(a), sb(b);
  return autograd::record("remainder", std::move(out), {&a, &b}, [sa, sb](const Tensor& g) {
    return remainder_backward(g, sa.get("remainder"), sb.get("remainder"));
  });
}

std::vector<Tensor> tensor_detail::remainder_backward(const Tensor& g, const Tensor& a, const Tensor& b) {
  return {sum_to(g, a.shape()), sum_to(mul(g, neg(floor_divide(a, b))), b.shape())};
}

Tensor remainder(const Tensor& a, Scalar b) { return remainder(a, scalar_tensor(b, promote_with_scalar(a.dtype(), b))); }

}  // namespace kael
