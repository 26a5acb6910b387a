// Neural-network functions, composed of the differentiable ops (so their gradients follow).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/dispatch/kernel_table.hpp"
#include "kernels/norm.hpp"
#include "kernels/random.hpp"
#include "tensor/backward.hpp"
#include "tensor/parallel.hpp"
#include "tensor/seed.hpp"
#include "tensor/strided.hpp"

namespace kael {

using namespace tensor_detail;

namespace {

// Whether a softmax over `dim` can take the row path: F32 on the CPU, contiguous, over the last
// dim. Elsewhere (a CUDA device included) it is composed of the elementwise ops and reductions.
bool last_dim_rows(const Tensor& a, int dim) {
  return a.dtype() == DType::F32 && a.device().type == Device::Type::cpu && a.is_contiguous() && a.dim() > 0 &&
         dim == a.dim() - 1 && a.numel() > 0;
}

// The largest of x[0..n), n > 0, NaN skipped unless all are: in 16 lanes that the compiler
// vectorizes (a single running maximum is a serial chain it keeps scalar, a nanosecond an
// element: 7 ms of a language model's 700 x 10000 head).
float row_max(const float* x, std::int64_t n) {
  constexpr std::int64_t kLanes = 16;
  float lane[kLanes];
  std::fill_n(lane, kLanes, x[0]);
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (std::int64_t j = 0; j < kLanes; ++j) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
  float m = lane[0];
  for (std::int64_t j = 1; j < kLanes; ++j) m = lane[j] > m ? lane[j] : m;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// The rows (a.numel() / C, C) of an F32 contiguous tensor, threaded over rows: each row r of
// `out` gets e = exp(x - max x) from the kernel table's exp, and finish(out_row, x_row, C, s)
// is then called with s, the sum of e in double (the kernel table's sum). A NaN in a row gives
// a NaN sum, so the row comes out NaN, as torch's; so does a row whose maximum is infinite.
template <class F>
Tensor softmax_rows(const Tensor& a, F finish) {
  const std::int64_t C = a.shape().back(), rows = a.numel() / C;
  Tensor out = Tensor::empty(DType::F32, a.shape());
  const float* x = a.data<float>();
  float* y = out.data<float>();
  const kernels::KernelTable& kt = kernels::active_kernels();
  parallel_range(rows, C * 8, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * C;
      float* yr = y + r * C;
      const float m = row_max(xr, C);
      for (std::int64_t i = 0; i < C; ++i) yr[i] = xr[i] - m;
      kt.exp(yr, yr, C);
      finish(yr, xr, C, m, kt.sum(yr, C));
    }
  });
  return out;
}

}  // namespace

Tensor log_softmax(const Tensor& a, int dim) {
  const int at = wrap_dim(dim, a.dim(), "log_softmax");
  if (!is_floating(a.dtype())) throw TypeError(str("log_softmax: needs a floating tensor, got ", dtype_name(a.dtype())));
  if (a.numel() == 0) return mul(a, 1);
  if (!last_dim_rows(a, at)) {
    // Shifting by the (constant) row maximum keeps exp finite; it does not change the result.
    const Tensor shift = max(a.detach(), at, true).first;
    const Tensor shifted = sub(a, shift);
    return sub(shifted, log(sum(exp(shifted), {at}, true)));
  }
  // y = (x - max) - log(sum e^(x - max)); dy/dx: g - e^y sum(g).
  Tensor out = softmax_rows(a, [](float* y, const float* x, std::int64_t C, float m, double s) {
    const auto log_sum = static_cast<float>(std::log(s));
    for (std::int64_t i = 0; i < C; ++i) y[i] = (x[i] - m) - log_sum;
  });
  if (!autograd::any_requires_grad({&a})) return out;
  autograd::SavedTensor sy(out);
  return autograd::record("log_softmax", std::move(out), {&a}, [sy, at](const Tensor& g) {
    return std::vector<Tensor>{log_softmax_backward(g, sy.get("log_softmax"), at)};
  });
}

Tensor softmax(const Tensor& a, int dim) {
  const int at = wrap_dim(dim, a.dim(), "softmax");
  if (!is_floating(a.dtype())) throw TypeError(str("softmax: needs a floating tensor, got ", dtype_name(a.dtype())));
  if (a.numel() == 0) return mul(a, 1);  // nothing to normalize (torch returns the empty tensor)
  if (!last_dim_rows(a, at)) {
    const Tensor e = exp(sub(a, max(a.detach(), at, true).first));
    return div(e, sum(e, {at}, true));
  }
  // y = e^(x - max) / sum; dy/dx: y (g - sum(g y)).
  Tensor out = softmax_rows(a, [](float* y, const float*, std::int64_t C, float, double s) {
    const auto total = static_cast<float>(s);
    for (std::int64_t i = 0; i < C; ++i) y[i] /= total;
  });
  if (!autograd::any_requires_grad({&a})) return out;
  autograd::SavedTensor sy(out);
  return autograd::record("softmax", std::move(out), {&a}, [sy, at](const Tensor& g) {
    return std::vector<Tensor>{softmax_backward(g, sy.get("softmax"), at)};
  });
}

Tensor tensor_detail::softmax_backward(const Tensor& g, const Tensor& y, int dim) {
  return mul(y, sub(g, sum(mul(g, y), {dim}, true)));
}

Tensor tensor_detail::log_softmax_backward(const Tensor& g, const Tensor& y, int dim) {
  if (g.dtype() != DType::F32 || !last_dim_rows(y, dim)) return sub(g, mul(exp(y), sum(g, {dim}, true)));
  // One pass per row on the kernel table, as the forward: the composed ops wrote and read
  // four (rows, C) temporaries, and the head of a language model makes C the vocabulary.
  const std::int64_t C = y.shape().back(), rows = y.numel() / C;
  const Tensor gd = dense(g);
  Tensor out = Tensor::empty(DType::F32, y.shape());
  const float* gp = gd.data<float>();
  const float* yp = y.data<float>();
  float* op = out.data<float>();
  const kernels::KernelTable& kt = kernels::active_kernels();
  parallel_range(rows, C * 8, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* gr = gp + r * C;
      float* o = op + r * C;
      const auto total = static_cast<float>(kt.sum(gr, C));
      kt.exp(o, yp + r * C, C);
      for (std::int64_t i = 0; i < C; ++i) o[i] = gr[i] - o[i] * total;
    }
  });
  return out;
}

Tensor tensor_detail::pick_columns_backward(const Tensor& g, const Tensor& ids, std::int64_t C, DType dt) {
  const std::int64_t N = ids.numel();
  const Tensor gd = dense(g.to(dt));
  const auto elem = static_cast<std::int64_t>(dtype_size(dt));
  Tensor grad = Tensor::empty(dt, {N, C});
  const std::int64_t* ti = ids.data<std::int64_t>();
  parallel_range(N, C, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t i = r0; i < r1; ++i) {
      std::byte* row = grad.raw_data() + i * C * elem;
      std::memset(row, 0, static_cast<std::size_t>(C * elem));
      std::memcpy(row + ti[i] * elem, gd.raw_data() + i * elem, static_cast<std::size_t>(elem));
    }
  });
  return grad;
}

Tensor tensor_detail::cross_entropy_backward(const Tensor& g, const Tensor& logits, const Tensor& ids,
                                             std::int64_t ignore_index, double inv_counted) {
  const std::int64_t N = logits.shape()[0], C = logits.shape()[1];
  const double scale = g.item<double>() * inv_counted;
  const std::int64_t* ti = ids.data<std::int64_t>();
  if (logits.dtype() != DType::F32) {
    Tensor pick = Tensor::zeros(logits.dtype(), {N, C}), counted_rows = Tensor::zeros(logits.dtype(), {N, 1});
    for (std::int64_t i = 0; i < N; ++i) {
      if (ti[i] == ignore_index) continue;
      store(logits.dtype(), pick.raw_data() + (i * C + ti[i]) * static_cast<std::int64_t>(pick.element_size()), 1.0);
      store(logits.dtype(), counted_rows.raw_data() + i * static_cast<std::int64_t>(pick.element_size()), 1.0);
    }
    return mul(sub(mul(softmax(logits, 1), counted_rows), pick), scale);
  }
  // One pass per row: kernels::cross_entropy_row.
  Tensor grad = Tensor::empty(DType::F32, {N, C});
  const float* x = logits.data<float>();
  float* out = grad.data<float>();
  parallel_range(N, C * 8, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t i = r0; i < r1; ++i)
      kernels::cross_entropy_row(out + i * C, x + i * C, ti[i] == ignore_index ? -1 : ti[i], static_cast<float>(scale), C);
  });
  return grad;
}

std::vector<Tensor> tensor_detail::layer_norm_backward(const Tensor& g, const Tensor& x, const Tensor& weight,
                                                      const Tensor& mean, const Tensor& rstd) {
  const std::int64_t C = x.shape().back(), rows = x.numel() / C;
  const Tensor gd = dense(g.to(DType::F32));
  Tensor dx = zeros(x.shape()), dw = weight.defined() ? zeros({C}) : Tensor(), db = zeros({C});
  kernels::layer_norm_backward(dx.data<float>(), dw.defined() ? dw.data<float>() : nullptr, db.data<float>(),
                               gd.data<float>(), x.data<float>(), weight.defined() ? weight.data<float>() : nullptr,
                               mean.data<float>(), rstd.data<float>(), rows, C);
  return {dx, dw, db};
}

namespace {

// layer_norm over the last dim of an F32 contiguous x (rows, C): kernels::layer_norm, which
// saves each row's mean and rstd for the backward (backward.hpp's layer_norm_backward).
Tensor layer_norm_rows(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  const std::int64_t C = x.shape().back(), rows = x.numel() / C;
  Tensor y = Tensor::empty(DType::F32, x.shape());
  Tensor mean = Tensor::empty(DType::F32, {rows, 1}), rstd = Tensor::empty(DType::F32, {rows, 1});
  kernels::layer_norm(y.data<float>(), mean.data<float>(), rstd.data<float>(), x.data<float>(),
                      weight.defined() ? weight.data<float>() : nullptr, bias.defined() ? bias.data<float>() : nullptr,
                      rows, C, static_cast<float>(eps));
  if (!autograd::any_requires_grad({&x, &weight, &bias})) return y;
  const autograd::SavedTensor saved_x(x), saved_w(weight);
  const bool with_bias = bias.defined();
  return autograd::record("layer_norm", std::move(y), {&x, &weight, &bias}, [saved_x, saved_w, mean, rstd, with_bias](const Tensor& g) {
    std::vector<Tensor> grads = layer_norm_backward(g, saved_x.get("layer_norm"), saved_w.get("layer_norm"), mean, rstd);
    if (!with_bias) grads[2] = Tensor();
    return grads;
  });
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias, double eps) {
  const std::size_t n = normalized_shape.size();
  if (n == 0 || n > x.shape().size() || !std::equal(normalized_shape.begin(), normalized_shape.end(), x.shape().end() - static_cast<std::ptrdiff_t>(n)))
    throw ValueError(str("layer_norm: normalized_shape ", shape_to_string(normalized_shape),
                         " does not match the last dims of the input's shape ", shape_to_string(x.shape())));
  for (const Tensor* p : {&weight, &bias})
    if (p->defined() && p->shape() != normalized_shape)
      throw ValueError(str("layer_norm: weight and bias must have shape ", shape_to_string(normalized_shape), ", got ",
                           shape_to_string(p->shape())));
  const auto f32_dense = [](const Tensor& t) {
    return !t.defined() || (t.dtype() == DType::F32 && t.is_contiguous() && t.device().type == Device::Type::cpu);
  };
  if (n == 1 && x.numel() > 0 && f32_dense(x) && f32_dense(weight) && f32_dense(bias)) return layer_norm_rows(x, weight, bias, eps);
  std::vector<int> dims;
  for (std::size_t i = 0; i < n; ++i) dims.push_back(-1 - static_cast<int>(i));
  const Tensor mu = mean(x, dims, true);
  const Tensor centered = sub(x, mu);
  const Tensor variance = mean(mul(centered, centered), dims, true);  // biased, as layer_norm uses
  Tensor y = mul(centered, rsqrt(add(variance, eps)));
  if (weight.defined()) y = mul(y, weight);
  if (bias.defined()) y = add(y, bias);
  return y;
}

namespace {

// The mean cross-entropy of logits (N, C) and class ids (N), in one pass per row on the kernel
// table (and one for the backward), for the common case: no smoothing, mean reduction.
Tensor cross_entropy_rows(const Tensor& logits, const Tensor& target, std::int64_t ignore_index) {
  const std::int64_t N = logits.shape()[0], C = logits.shape()[1];
  const Tensor ids = target.to(DType::I64).contiguous();
  const std::int64_t* t = ids.data<std::int64_t>();
  std::int64_t counted = 0;
  for (std::int64_t i = 0; i < N; ++i) {
    if (t[i] == ignore_index) continue;
    if (t[i] < 0 || t[i] >= C)
      throw IndexError(str("cross_entropy: target ", t[i], " at position ", i, " out of range for ", C, " classes"));
    ++counted;
  }
  // loss = (1 / counted) sum over counted rows of -log softmax(logits)[i, t_i] (NaN when no
  // target counts, as PyTorch): F32 rows through kernels::cross_entropy_row, the training
  // step's; other dtypes from log_softmax.
  const Tensor x = logits.detach().contiguous();
  double total = 0;
  if (x.dtype() == DType::F32) {
    std::vector<float> losses(static_cast<std::size_t>(N));
    const float* px = x.data<float>();
    parallel_range(N, C * 8, [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t i = r0; i < r1; ++i)
        losses[static_cast<std::size_t>(i)] =
            kernels::cross_entropy_row(nullptr, px + i * C, t[i] == ignore_index ? -1 : t[i], 1.0f, C);
    });
    for (const float l : losses) total += l;
  } else {
    const Tensor log_probs = log_softmax(x, 1).contiguous();
    for (std::int64_t i = 0; i < N; ++i)
      if (t[i] != ignore_index) total -= log_probs.value_as_double(i * C + t[i]);
  }
  const double inv_counted = 1.0 / static_cast<double>(counted);
  Tensor loss = full({}, total * inv_counted, logits.dtype());
  if (!autograd::any_requires_grad({&logits})) return loss;
  // A private copy of the logits, as torch keeps its own log-probabilities: the caller may
  // write the logits in place before the backward.
  const Tensor kept = logits.is_contiguous() ? x.clone() : x;
  return autograd::record("cross_entropy", std::move(loss), {&logits}, [kept, ids, ignore_index, inv_counted](const Tensor& g) {
    return std::vector<Tensor>{cross_entropy_backward(g, kept, ids, ignore_index, inv_counted)};
  });
}

// The loss's input as (rows, C) and the targets as (rows), from torch's (C) / (N, C) /
// (N, C, d...) forms; `target_shape` is what reduction "none" returns.
struct LossRows {
  Tensor input, target;
  Shape target_shape;
};

LossRows loss_rows(const char* op, const Tensor& input, const Tensor& target) {
  if (!is_integral(target.dtype()))
    throw TypeError(str(op, ": target must be integer class ids, got ", dtype_name(target.dtype())));
  const auto mismatch = [&] {
    return ValueError(str(op, ": expects input (N, C), (C) or (N, C, d...) and target (N), () or (N, d...), got shapes ",
                          shape_to_string(input.shape()), " and ", shape_to_string(target.shape())));
  };
  if (input.dim() == 1) {
    if (target.dim() != 0) throw mismatch();
    return {input.reshape({1, input.size(0)}), target.reshape({1}), {}};
  }
  if (input.dim() < 1 || target.dim() != input.dim() - 1 || target.size(0) != input.size(0)) throw mismatch();
  for (int d = 2; d < input.dim(); ++d)
    if (target.size(d - 1) != input.size(d)) throw mismatch();
  if (input.dim() == 2) return {input, target, target.shape()};
  std::vector<int> order{0};  // (N, C, d...) -> (N, d..., C)
  for (int d = 2; d < input.dim(); ++d) order.push_back(d);
  order.push_back(1);
  return {input.permute(order).reshape({-1, input.size(1)}), target.reshape({-1}), target.shape()};
}

void check_reduction(const char* op, std::string_view reduction) {
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    throw ValueError(str(op, ": reduction must be \"mean\", \"sum\" or \"none\", got \"", std::string(reduction), "\""));
}

// picked (N) = rows (N, C)[i, ids[i]] for ids (N, I64) in [0, C). gather's form for one pick per
// row: its gradient (pick_columns_backward) is written straight into a (N, C) tensor of rows'
// dtype, each row zeroed and its one pick set by one thread, where gather's general backward
// adds into a zeroed F64 copy and converts it (a language model's head: 56 MB a step).
Tensor pick_columns(const Tensor& rows, const Tensor& ids) {
  const std::int64_t N = rows.shape()[0], C = rows.shape()[1];
  // Ignored targets pick column 0 (and count 0): there must be one.
  if (C == 0 && N > 0) throw IndexError(str("the loss's input ", shape_to_string(rows.shape()), " has no classes"));
  const Tensor x = dense(rows.detach());
  const DType dt = x.dtype();
  const auto elem = static_cast<std::int64_t>(x.element_size());
  const std::int64_t* t = ids.data<std::int64_t>();
  Tensor picked = Tensor::empty(dt, {N});
  for (std::int64_t i = 0; i < N; ++i)
    std::memcpy(picked.raw_data() + i * elem, x.raw_data() + (i * C + t[i]) * elem, static_cast<std::size_t>(elem));
  if (!autograd::any_requires_grad({&rows})) return picked;
  return autograd::record("nll_loss", std::move(picked), {&rows}, [ids, C, dt](const Tensor& g) {
    return std::vector<Tensor>{pick_columns_backward(g, ids, C, dt)};
  });
}

// The negative log-likelihood of rows of log-probabilities (rows, C) at the targets, smoothed
// with `smoothing` of the mean over the classes, 0 at ignored targets, then reduced.
Tensor nll_rows(const char* op, const LossRows& rows, std::int64_t ignore_index, std::string_view reduction, double smoothing) {
  const std::int64_t C = rows.input.size(1);
  const Tensor ids = rows.target.to(DType::I64);
  const Tensor counted = ne(ids, ignore_index);
  for (const std::int64_t t : ids.to_vector<std::int64_t>())
    if (t != ignore_index && (t < 0 || t >= C)) throw IndexError(str(op, ": target ", t, " is out of range for ", C, " classes"));
  const Tensor safe_ids = where(counted, ids, zeros({}, DType::I64));
  const Tensor weight = counted.to(rows.input.dtype());
  Tensor loss = mul(neg(pick_columns(rows.input, safe_ids.contiguous())), weight);
  if (smoothing > 0) {
    const Tensor uniform = mul(neg(mean(rows.input, {1})), weight);
    loss = add(mul(loss, 1.0 - smoothing), mul(uniform, smoothing));
  }
  if (reduction == "none") return loss.reshape(rows.target_shape);
  if (reduction == "sum") return sum(loss);
  return div(sum(loss), sum(weight));  // NaN when nothing counts, as torch
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& target, std::int64_t ignore_index, std::string_view reduction,
                     double label_smoothing) {
  check_reduction("cross_entropy", reduction);
  if (!(label_smoothing >= 0.0 && label_smoothing <= 1.0))
    throw ValueError(str("cross_entropy: label_smoothing must be in [0, 1], got ", label_smoothing));
  const LossRows rows = loss_rows("cross_entropy", logits, target);
  if (reduction == "mean" && label_smoothing == 0.0 && logits.dim() == 2) return cross_entropy_rows(logits, target, ignore_index);
  return nll_rows("cross_entropy", {log_softmax(rows.input, 1), rows.target, rows.target_shape}, ignore_index, reduction,
                  label_smoothing);
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, std::int64_t ignore_index, std::string_view reduction) {
  check_reduction("nll_loss", reduction);
  return nll_rows("nll_loss", loss_rows("nll_loss", log_probs, target), ignore_index, reduction, 0.0);
}

Tensor mse_loss(const Tensor& a, const Tensor& b, std::string_view reduction) {
  check_reduction("mse_loss", reduction);
  const Tensor d = sub(a, b);
  const Tensor squares = mul(d, d);
  if (reduction == "none") return squares;
  return reduction == "sum" ? sum(squares) : mean(squares);
}

namespace {

// out = x * (keep_at(i) ? scale : 0) over a contiguous floating x, in one pass on the pool's
// threads. The scale is first rounded to x's dtype (the value torch's noise tensor holds), and
// the factor multiplies rather than selects, so a NaN stays NaN where dropped, as in torch. The
// factor is scale * keep in arithmetic, not a branch (a random mask mispredicts one in p), with
// keep_at giving 0 or 1 as an int32 read from bytes: GCC vectorizes that conversion, not bool's.
// work_per_item: keep_at's cost in the pool's units (parallel.hpp).
template <class KeepAt>
Tensor scale_kept(const Tensor& x, double scale, KeepAt keep_at, std::int64_t work_per_item = 1) {
  const DType dt = x.dtype();
  Tensor out = Tensor::empty(dt, x.shape());
  const Tensor factor = full({}, scale, dt);
  const std::int64_t n = x.numel();
  if (dt == DType::F32) {
    const float f = factor.item<float>();
    const float* in = x.data<float>();
    float* o = out.data<float>();
    parallel_range(n, work_per_item, [&](std::int64_t begin, std::int64_t end) {
      // Locals, not the captures: a store through dst could alias the closure, which would then
      // be reloaded each element and the loop would not vectorize.
      const float* src = in;
      float* dst = o;
      const float factor = f;
      const KeepAt keep = keep_at;
      for (std::int64_t i = begin; i < end; ++i) dst[i] = src[i] * (factor * static_cast<float>(keep(i)));
    });
    return out;
  }
  const auto size = static_cast<std::int64_t>(x.element_size());
  const std::byte* in = x.raw_data();
  std::byte* o = out.raw_data();
  dispatch(dt, [&]<class C>() {
    if constexpr (std::is_floating_point_v<C>) {
      const C f = load<C>(dt, factor.raw_data());
      parallel_range(n, work_per_item, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i)
          store(dt, o + i * size, load<C>(dt, in + i * size) * (f * static_cast<C>(keep_at(i))));
      });
    }
  });
  return out;
}

}  // namespace

Tensor tensor_detail::dropout_backward(const Tensor& g, const Tensor& keep, double scale) {
  if (keep.dtype() != DType::BOOL || keep.shape() != g.shape())
    throw ValueError(str("dropout_backward: expected a BOOL mask of the gradient's shape ", shape_to_string(g.shape()),
                         ", got ", dtype_name(keep.dtype()), " ", shape_to_string(keep.shape())));
  const Tensor gd = dense(g), kd = dense(keep);
  const auto* k = reinterpret_cast<const std::uint8_t*>(kd.raw_data());  // BOOL: bytes 0 or 1
  return scale_kept(gd, scale, [k](std::int64_t i) { return static_cast<std::int32_t>(k[i]); });
}

// Each element i is kept where its uniform draw in [0, 1) is >= p: the counter-based draw of
// kernels/random.hpp for (seed, i), the seed one draw of the process-wide generator
// (draw_seed; a DropoutStreams scope's stream inside one), so manual_seed makes the mask
// reproducible and the pool's threads draw it in one pass with the output, whatever their
// number (a serial generator drew 5% of an LSTM language model's step on one thread). The mask
// is kept as BOOL for the backward.
Tensor dropout(const Tensor& a, double p, bool training) {
  if (!(p >= 0.0 && p <= 1.0)) throw ValueError(str("dropout: p must be in [0, 1], got ", p));  // NaN too
  if (!training || p == 0.0) return a;
  if (p == 1.0) return mul(a, zeros_like(a));
  // torch too refuses to scale an integer input.
  if (!is_floating(a.dtype()))
    throw TypeError(str("dropout: expected a floating input, got ", dtype_name(a.dtype())));
  const Tensor x = dense(a);
  // Rows along dimension 0, for a DropoutStreams scope's numbering.
  const std::int64_t rows = a.dim() > 0 ? a.shape()[0] : 1;
  const kernels::DropoutMask mask = dropout_mask(p, rows > 0 ? a.numel() / rows : 0);
  Tensor keep = Tensor::empty(DType::BOOL, a.shape());
  auto* k = reinterpret_cast<std::uint8_t*>(keep.raw_data());
  const double scale = 1.0 / (1.0 - p);
  constexpr std::int64_t kDrawWork = 16;  // three 64-bit mixes an element
  Tensor out = scale_kept(
      x, scale,
      [mask, k](std::int64_t i) {
        const std::uint8_t kept = mask.kept(static_cast<std::uint64_t>(i)) ? 1 : 0;
        k[i] = kept;
        return static_cast<std::int32_t>(kept);
      },
      kDrawWork);
  if (!autograd::any_requires_grad({&a})) return out;
  return autograd::record("dropout", std::move(out), {&a}, [keep, scale](const Tensor& g) {
    return std::vector<Tensor>{dropout_backward(g, keep, scale)};
  });
}

}  // namespace kael
