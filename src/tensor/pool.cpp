// Pooling (tensor/pool.hpp): each (sample, channel) plane on its own, threaded over the planes.
// Every backward sends each output's gradient back to the inputs of its window: max pooling
// to the one it picked (the saved index), average pooling to all of them, divided by the count.
#include "kael/tensor/pool.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kael/core/error.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "tensor/backward.hpp"
#include "tensor/parallel.hpp"
#include "tensor/strided.hpp"
#include "tensor/window.hpp"

namespace kael {

using namespace tensor_detail;

namespace {

// Calls f.template operator()<T>() with float for F32, double for F64 (the dtypes pooling takes).
template <class F>
void dispatch_floating(DType dtype, F&& f) {
  if (dtype == DType::F64) f.template operator()<double>();
  else f.template operator()<float>();
}

// The sizes of one pooling: planes (P = N C) of (H, W) into (Ho, Wo).
struct PoolShape {
  std::int64_t P, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw;
};

// torch's pooling output size along one dim.
std::int64_t pooled_size(std::int64_t size, std::int64_t k, std::int64_t stride, std::int64_t pad,
                         std::int64_t dilation, bool ceil_mode) {
  const std::int64_t span = size + 2 * pad - dilation * (k - 1) - 1;
  if (span < 0) return 0;  // the window is larger than the padded input
  std::int64_t out = (span + (ceil_mode ? stride - 1 : 0)) / stride + 1;
  // With ceil_mode, a last window that would start inside the right padding is dropped.
  if (ceil_mode && (out - 1) * stride >= size + pad) --out;
  return out;
}

PoolShape pool_shape(const char* op, const Tensor& x, Size2 kernel, Size2 stride, Size2 padding, Size2 dilation,
                     bool ceil_mode) {
  if (x.dim() != 4) throw ValueError(str(op, ": expected a 3-D or 4-D input, got ", shape_to_string(x.shape())));
  if (x.dtype() != DType::F32 && x.dtype() != DType::F64)
    throw TypeError(str(op, ": input must be F32 or F64, got ", dtype_name(x.dtype())));
  for (int d = 0; d < 2; ++d) {
    if (stride[d] == 0) stride[d] = kernel[d];
    check_window_arg(op, "input size", x.shape()[2 + d]);
    check_window_arg(op, "kernel_size", kernel[d]);
    check_window_arg(op, "stride", stride[d]);
    check_window_arg(op, "dilation", dilation[d]);
    if (kernel[d] <= 0) throw ValueError(str(op, ": kernel_size must be positive, got ", kernel[d]));
    if (stride[d] <= 0) throw ValueError(str(op, ": stride must be positive, got ", stride[d]));
    if (dilation[d] <= 0) throw ValueError(str(op, ": dilation must be positive, got ", dilation[d]));
    if (padding[d] < 0 || padding[d] > kernel[d] / 2)
      throw ValueError(str(op, ": padding should be at most half of the kernel size, got padding ", padding[d],
                           " for kernel ", kernel[d]));
  }
  const std::int64_t H = x.shape()[2], W = x.shape()[3];
  PoolShape s{x.shape()[0] * x.shape()[1], H, W,
              pooled_size(H, kernel[0], stride[0], padding[0], dilation[0], ceil_mode),
              pooled_size(W, kernel[1], stride[1], padding[1], dilation[1], ceil_mode),
              kernel[0], kernel[1], stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1]};
  if (s.Ho <= 0 || s.Wo <= 0)
    throw ValueError(str(op, ": the output would be empty: input ", shape_to_string(x.shape()), ", kernel (", kernel[0],
                         ", ", kernel[1], ")"));
  return s;
}

Shape out_shape(const Tensor& x, const PoolShape& s) { return {x.shape()[0], x.shape()[1], s.Ho, s.Wo}; }

// The planes of a pooling's backward: g (N, C, Ho, Wo) F32 or F64 against the input's 4-D shape.
PoolShape backward_planes(const char* op, const Tensor& g, const Shape& input_shape) {
  if (input_shape.size() != 4 || g.dim() != 4 || g.shape()[0] != input_shape[0] || g.shape()[1] != input_shape[1])
    throw ValueError(str(op, ": expected g (N, C, Ho, Wo) for an input (N, C, H, W), got g ", shape_to_string(g.shape()),
                         " and input ", shape_to_string(input_shape)));
  if (g.dtype() != DType::F32 && g.dtype() != DType::F64)
    throw TypeError(str(op, ": g must be F32 or F64, got ", dtype_name(g.dtype())));
  return {input_shape[0] * input_shape[1], input_shape[2], input_shape[3], g.shape()[2], g.shape()[3], 1, 1, 1, 1,
          0, 0, 1, 1};
}

// Calls f(plane, begin, end) over the planes on the pool's threads.
template <class F>
void over_planes(const PoolShape& s, F f) {
  parallel_range(s.P, s.Ho * s.Wo * s.kh * s.kw + s.H * s.W, [&](std::int64_t begin, std::int64_t end) { f(begin, end); });
}

// The taps [lo, hi) of a window starting at `origin` (stride `dilation`) that fall inside [0, size).
std::pair<std::int64_t, std::int64_t> inside_taps(std::int64_t origin, std::int64_t k, std::int64_t dilation,
                                                  std::int64_t size) {
  const std::int64_t lo = origin >= 0 ? 0 : (-origin + dilation - 1) / dilation;
  const std::int64_t hi = size - origin <= 0 ? 0 : std::min(k, (size - origin + dilation - 1) / dilation);
  return {lo, std::max(lo, hi)};
}

// One tap of the window over outputs [lo, hi) of a row: the tap's value replaces the row's
// best where it is larger or NaN (torch's rule). Restrict and locals: the loop vectorizes.
template <class T>
void take_tap(const T* __restrict plane, T* __restrict best, std::int64_t* __restrict at, std::int64_t offset,
              std::int64_t stride, std::int64_t lo, std::int64_t hi) {
  for (std::int64_t ox = lo; ox < hi; ++ox) {
    const std::int64_t tap = offset + ox * stride;
    const T v = plane[tap];
    const T b = best[ox];
    const bool take = (v > b) | (v != v);
    best[ox] = take ? v : b;
    at[ox] = take ? tap : at[ox];
  }
}

// Output row by output row, one tap of the window at a time over the whole row: the outputs of
// a row are independent, so the loop over them has no carried dependency and vectorizes.
template <class T>
void max_pool_planes(const T* x, T* y, std::int64_t* index, const PoolShape& s) {
  // Each tap column's outputs [lo, hi) whose input column lies inside, and each output's first tap.
  std::vector<std::pair<std::int64_t, std::int64_t>> tap_columns(static_cast<std::size_t>(s.kw));
  for (std::int64_t j = 0; j < s.kw; ++j) {
    const std::int64_t offset = j * s.dw - s.pw;  // input column of output ox: ox * sw + offset
    const std::int64_t lo = std::clamp<std::int64_t>(offset >= 0 ? 0 : (-offset + s.sw - 1) / s.sw, 0, s.Wo);
    const std::int64_t hi = std::clamp<std::int64_t>(s.W - offset <= 0 ? 0 : (s.W - offset + s.sw - 1) / s.sw, lo, s.Wo);
    tap_columns[static_cast<std::size_t>(j)] = {lo, hi};
  }
  std::vector<std::int64_t> first_column(static_cast<std::size_t>(s.Wo));
  for (std::int64_t ox = 0; ox < s.Wo; ++ox)
    first_column[static_cast<std::size_t>(ox)] = ox * s.sw - s.pw + inside_taps(ox * s.sw - s.pw, s.kw, s.dw, s.W).first * s.dw;
  over_planes(s, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t p = begin; p < end; ++p) {
      const T* plane = x + p * s.H * s.W;
      for (std::int64_t oy = 0; oy < s.Ho; ++oy) {
        const std::int64_t y0 = oy * s.sh - s.ph;
        const auto [i_lo, i_hi] = inside_taps(y0, s.kh, s.dh, s.H);
        T* best = y + (p * s.Ho + oy) * s.Wo;
        std::int64_t* at = index + (p * s.Ho + oy) * s.Wo;
        // torch's rule: the first tap unless a later one is larger or NaN (the last NaN wins).
        const std::int64_t first_row = (y0 + i_lo * s.dh) * s.W;
        for (std::int64_t ox = 0; ox < s.Wo; ++ox) {
          best[ox] = -std::numeric_limits<T>::infinity();
          at[ox] = first_row + first_column[static_cast<std::size_t>(ox)];
        }
        for (std::int64_t i = i_lo; i < i_hi; ++i) {
          const std::int64_t row = (y0 + i * s.dh) * s.W;
          for (std::int64_t j = 0; j < s.kw; ++j) {
            const auto [lo, hi] = tap_columns[static_cast<std::size_t>(j)];
            take_tap(plane, best, at, row + j * s.dw - s.pw, s.sw, lo, hi);
          }
        }
      }
    }
  });
}

// dx for max pooling: each output's gradient added to the input its index names.
Tensor max_pool_planes_backward(const Tensor& grad, const Tensor& indices, const Shape& input_shape, const PoolShape& s) {
  Tensor dx = Tensor::zeros(grad.dtype(), input_shape);
  const std::int64_t* index = indices.data<std::int64_t>();
  dispatch_floating(grad.dtype(), [&]<class T>() {
    const T* g = grad.data<T>();
    T* d = dx.data<T>();
    over_planes(s, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t p = begin; p < end; ++p)
        for (std::int64_t o = p * s.Ho * s.Wo; o < (p + 1) * s.Ho * s.Wo; ++o)
          if (index[o] >= 0) d[p * s.H * s.W + index[o]] += g[o];
    });
  });
  return dx;
}

// The window of output oy along one dim for average pooling: [start, end) inside the input
// and the count torch divides by with padding included.
struct AvgWindow {
  std::int64_t start, end, padded_count;
};
AvgWindow avg_window(std::int64_t o, std::int64_t k, std::int64_t stride, std::int64_t pad, std::int64_t size) {
  std::int64_t start = o * stride - pad;
  std::int64_t end = std::min(start + k, size + pad);
  const std::int64_t padded = end - start;
  start = std::max<std::int64_t>(start, 0);
  end = std::min(end, size);
  return {start, end, padded};
}

// Calls f(plane, oy, ox, y0, y1, x0, x1, divisor) for each output of an average pooling.
template <class F>
void for_each_avg_window(const PoolShape& s, bool count_include_pad, std::int64_t divisor_override, F f) {
  over_planes(s, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t p = begin; p < end; ++p)
      for (std::int64_t oy = 0; oy < s.Ho; ++oy) {
        const AvgWindow wy = avg_window(oy, s.kh, s.sh, s.ph, s.H);
        for (std::int64_t ox = 0; ox < s.Wo; ++ox) {
          const AvgWindow wx = avg_window(ox, s.kw, s.sw, s.pw, s.W);
          const std::int64_t divisor = divisor_override > 0 ? divisor_override
                                       : count_include_pad ? wy.padded_count * wx.padded_count
                                                           : (wy.end - wy.start) * (wx.end - wx.start);
          f(p, oy, ox, wy, wx, divisor);
        }
      }
  });
}

Tensor avg_pool2d_forward(const Tensor& x, const PoolShape& s, bool count_include_pad, std::int64_t divisor_override,
                          const Shape& shape) {
  Tensor out = Tensor::empty(x.dtype(), shape);
  dispatch_floating(x.dtype(), [&]<class T>() {
    const T* xd = x.data<T>();
    T* y = out.data<T>();
    for_each_avg_window(s, count_include_pad, divisor_override,
                        [&](std::int64_t p, std::int64_t oy, std::int64_t ox, AvgWindow wy, AvgWindow wx, std::int64_t div) {
                          T total = 0;
                          for (std::int64_t iy = wy.start; iy < wy.end; ++iy)
                            for (std::int64_t ix = wx.start; ix < wx.end; ++ix) total += xd[(p * s.H + iy) * s.W + ix];
                          y[(p * s.Ho + oy) * s.Wo + ox] = div > 0 ? total / static_cast<T>(div) : T(0);
                        });
  });
  return out;
}

Tensor avg_pool_planes_backward(const Tensor& grad, const Shape& input_shape, const PoolShape& s,
                                bool count_include_pad, std::int64_t divisor_override) {
  Tensor dx = Tensor::zeros(grad.dtype(), input_shape);
  dispatch_floating(grad.dtype(), [&]<class T>() {
    const T* g = grad.data<T>();
    T* d = dx.data<T>();
    for_each_avg_window(s, count_include_pad, divisor_override,
                        [&](std::int64_t p, std::int64_t oy, std::int64_t ox, AvgWindow wy, AvgWindow wx, std::int64_t div) {
                          if (div <= 0) return;
                          const T share = g[(p * s.Ho + oy) * s.Wo + ox] / static_cast<T>(div);
                          for (std::int64_t iy = wy.start; iy < wy.end; ++iy)
                            for (std::int64_t ix = wx.start; ix < wx.end; ++ix) d[(p * s.H + iy) * s.W + ix] += share;
                        });
  });
  return dx;
}

// The input range [floor(i size / out), ceil((i + 1) size / out)) of adaptive output i.
std::pair<std::int64_t, std::int64_t> adaptive_range(std::int64_t i, std::int64_t out, std::int64_t size) {
  return {(i * size) / out, ((i + 1) * size + out - 1) / out};
}

// The planes of an adaptive pooling of P planes (H, W) into (Ho, Wo).
PoolShape adaptive_shape(std::int64_t P, std::int64_t H, std::int64_t W, std::int64_t Ho, std::int64_t Wo) {
  PoolShape s{P, H, W, Ho, Wo, 1, 1, 1, 1, 0, 0, 1, 1};
  s.kh = (s.H + s.Ho - 1) / s.Ho + 1;  // bounds each window, for the threading estimate only
  s.kw = (s.W + s.Wo - 1) / s.Wo + 1;
  return s;
}

// Calls f(plane, output offset, y0, y1, x0, x1) for each output of an adaptive average pooling.
template <class F>
void for_each_adaptive_window(const PoolShape& s, F f) {
  over_planes(s, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t p = begin; p < end; ++p)
      for (std::int64_t oy = 0; oy < s.Ho; ++oy) {
        const auto [y0, y1] = adaptive_range(oy, s.Ho, s.H);
        for (std::int64_t ox = 0; ox < s.Wo; ++ox) {
          const auto [x0, x1] = adaptive_range(ox, s.Wo, s.W);
          f(p, (p * s.Ho + oy) * s.Wo + ox, y0, y1, x0, x1);
        }
      }
  });
}

Tensor adaptive_avg_pool_planes_backward(const Tensor& grad, const Shape& input_shape, const PoolShape& s) {
  Tensor dx = Tensor::zeros(grad.dtype(), input_shape);
  dispatch_floating(grad.dtype(), [&]<class T>() {
    const T* g = grad.data<T>();
    T* d = dx.data<T>();
    for_each_adaptive_window(s, [&](std::int64_t p, std::int64_t o, std::int64_t y0, std::int64_t y1, std::int64_t x0,
                                    std::int64_t x1) {
      const T share = g[o] / static_cast<T>((y1 - y0) * (x1 - x0));
      for (std::int64_t iy = y0; iy < y1; ++iy)
        for (std::int64_t ix = x0; ix < x1; ++ix) d[(p * s.H + iy) * s.W + ix] += share;
    });
  });
  return dx;
}

}  // namespace

std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, Size2 kernel_size, Size2 stride, Size2 padding,
                                                  Size2 dilation, bool ceil_mode) {
  if (input.dim() == 3) {
    auto [out, index] = max_pool2d_with_indices(input.unsqueeze(0), kernel_size, stride, padding, dilation, ceil_mode);
    return {out.squeeze(0), index.squeeze(0)};
  }
  const PoolShape s = pool_shape("max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode);
  const Tensor x = dense(input.detach());
  Tensor out = Tensor::empty(x.dtype(), out_shape(x, s));
  Tensor indices = Tensor::empty(DType::I64, out_shape(x, s));
  dispatch_floating(x.dtype(), [&]<class T>() { max_pool_planes(x.data<T>(), out.data<T>(), indices.data<std::int64_t>(), s); });
  if (!autograd::any_requires_grad({&input})) return {out, indices};
  const Shape shape = input.shape();
  out = autograd::record("max_pool2d", std::move(out), {&input}, [indices, shape](const Tensor& g) {
    return std::vector<Tensor>{max_pool2d_backward(g, indices, shape)};
  });
  return {out, indices};
}

Tensor max_pool2d(const Tensor& input, Size2 kernel_size, Size2 stride, Size2 padding, Size2 dilation, bool ceil_mode) {
  return max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode).first;
}

Tensor max_pool1d(const Tensor& input, std::int64_t kernel_size, std::int64_t stride, std::int64_t padding,
                  std::int64_t dilation, bool ceil_mode) {
  if (input.dim() != 2 && input.dim() != 3)
    throw ValueError(str("max_pool1d: expected a 2-D or 3-D input, got ", shape_to_string(input.shape())));
  const int at = input.dim() - 1;
  return max_pool2d(input.unsqueeze(at), {1, kernel_size}, {1, stride == 0 ? kernel_size : stride}, {0, padding},
                    {1, dilation}, ceil_mode)
      .squeeze(at);
}

Tensor avg_pool2d(const Tensor& input, Size2 kernel_size, Size2 stride, Size2 padding, bool ceil_mode,
                  bool count_include_pad, std::int64_t divisor_override) {
  if (input.dim() == 3)
    return avg_pool2d(input.unsqueeze(0), kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
        .squeeze(0);
  if (divisor_override < 0) throw ValueError(str("avg_pool2d: divisor_override must be positive, got ", divisor_override));
  const PoolShape s = pool_shape("avg_pool2d", input, kernel_size, stride, padding, {1, 1}, ceil_mode);
  const Tensor x = dense(input.detach());
  Tensor out = avg_pool2d_forward(x, s, count_include_pad, divisor_override, out_shape(x, s));
  if (!autograd::any_requires_grad({&input})) return out;
  const Shape shape = input.shape();
  return autograd::record("avg_pool2d", std::move(out), {&input},
                          [shape, s, count_include_pad, divisor_override](const Tensor& g) {
                            return std::vector<Tensor>{avg_pool2d_backward(g, shape, {s.kh, s.kw}, {s.sh, s.sw},
                                                                           {s.ph, s.pw}, count_include_pad,
                                                                           divisor_override)};
                          });
}

Tensor adaptive_avg_pool2d(const Tensor& input, Size2 output_size) {
  if (input.dim() == 3) return adaptive_avg_pool2d(input.unsqueeze(0), output_size).squeeze(0);
  if (input.dim() != 4)
    throw ValueError(str("adaptive_avg_pool2d: expected a 3-D or 4-D input, got ", shape_to_string(input.shape())));
  if (input.dtype() != DType::F32 && input.dtype() != DType::F64)
    throw TypeError(str("adaptive_avg_pool2d: input must be F32 or F64, got ", dtype_name(input.dtype())));
  if (output_size[0] <= 0 || output_size[1] <= 0)
    throw ValueError(str("adaptive_avg_pool2d: output_size must be positive, got (", output_size[0], ", ",
                         output_size[1], ")"));
  if (input.shape()[2] <= 0 || input.shape()[3] <= 0)
    throw ValueError(str("adaptive_avg_pool2d: empty input ", shape_to_string(input.shape())));
  const Tensor x = dense(input.detach());
  const PoolShape s = adaptive_shape(x.shape()[0] * x.shape()[1], x.shape()[2], x.shape()[3], output_size[0],
                                     output_size[1]);
  Tensor out = Tensor::empty(x.dtype(), out_shape(x, s));
  dispatch_floating(x.dtype(), [&]<class T>() {
    const T* xd = x.data<T>();
    T* y = out.data<T>();
    for_each_adaptive_window(s, [&](std::int64_t p, std::int64_t o, std::int64_t y0, std::int64_t y1, std::int64_t x0,
                                    std::int64_t x1) {
      T total = 0;
      for (std::int64_t iy = y0; iy < y1; ++iy)
        for (std::int64_t ix = x0; ix < x1; ++ix) total += xd[(p * s.H + iy) * s.W + ix];
      y[o] = total / static_cast<T>((y1 - y0) * (x1 - x0));
    });
  });
  if (!autograd::any_requires_grad({&input})) return out;
  const Shape shape = input.shape();
  return autograd::record("adaptive_avg_pool2d", std::move(out), {&input}, [shape](const Tensor& g) {
    return std::vector<Tensor>{adaptive_avg_pool2d_backward(g, shape)};
  });
}

Tensor tensor_detail::max_pool2d_backward(const Tensor& g, const Tensor& indices, const Shape& input_shape) {
  const PoolShape s = backward_planes("max_pool2d_backward", g, input_shape);
  if (indices.dtype() != DType::I64 || indices.shape() != g.shape())
    throw ValueError(str("max_pool2d_backward: indices must be I64 of g's shape ", shape_to_string(g.shape()), ", got ",
                         dtype_name(indices.dtype()), " ", shape_to_string(indices.shape())));
  const Tensor at = dense(indices);
  const std::int64_t* index = at.data<std::int64_t>();
  for (std::int64_t i = 0; i < at.numel(); ++i)
    if (index[i] >= s.H * s.W)
      throw IndexError(str("max_pool2d_backward: index ", index[i], " is outside a plane of ", s.H, " x ", s.W));
  return max_pool_planes_backward(dense(g), at, input_shape, s);
}

Tensor tensor_detail::avg_pool2d_backward(const Tensor& g, const Shape& input_shape, Size2 kernel_size, Size2 stride,
                                          Size2 padding, bool count_include_pad, std::int64_t divisor_override) {
  for (int d = 0; d < 2; ++d)
    if (kernel_size[d] <= 0 || stride[d] < 0 || padding[d] < 0)
      throw ValueError(str("avg_pool2d_backward: needs a positive kernel_size, stride >= 0 and padding >= 0, got (",
                           kernel_size[0], ", ", kernel_size[1], "), (", stride[0], ", ", stride[1], ") and (",
                           padding[0], ", ", padding[1], ")"));
  PoolShape s = backward_planes("avg_pool2d_backward", g, input_shape);
  s.kh = kernel_size[0];
  s.kw = kernel_size[1];
  s.sh = stride[0] == 0 ? kernel_size[0] : stride[0];
  s.sw = stride[1] == 0 ? kernel_size[1] : stride[1];
  s.ph = padding[0];
  s.pw = padding[1];
  return avg_pool_planes_backward(dense(g), input_shape, s, count_include_pad, divisor_override);
}

Tensor tensor_detail::adaptive_avg_pool2d_backward(const Tensor& g, const Shape& input_shape) {
  const PoolShape planes = backward_planes("adaptive_avg_pool2d_backward", g, input_shape);
  if (planes.H <= 0 || planes.W <= 0 || planes.Ho <= 0 || planes.Wo <= 0)
    throw ValueError(str("adaptive_avg_pool2d_backward: empty input ", shape_to_string(input_shape), " or g ",
                         shape_to_string(g.shape())));
  const PoolShape s = adaptive_shape(planes.P, planes.H, planes.W, planes.Ho, planes.Wo);
  return adaptive_avg_pool_planes_backward(dense(g), input_shape, s);
}

}  // namespace kael
