// conv2d and conv1d (tensor/conv.hpp). Each (sample, group) is one product on the kernel
// table: its input channels unrolled into im2col columns (Cg kH kW, Ho Wo), then
// out (Og, Ho Wo) = W_g (Og, Cg kH kW) @ columns. The backward runs the same products the other
// way round: dcolumns = W_g^T dy folded back onto dx (col2im), and dW_g = dy columns^T per
// sample, summed over the samples in order so that the result never depends on the threads.
#include "kael/tensor/conv.hpp"

#include <algorithm>
#include <memory>
#include <vector>

#include "kael/core/error.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "kernels/gemm.hpp"
#include "tensor/backward.hpp"
#include "tensor/parallel.hpp"
#include "tensor/strided.hpp"
#include "tensor/window.hpp"

namespace kael {

using namespace tensor_detail;

namespace {

// The sizes of one conv2d: input (N, C, H, W), weight (O, C / groups, kh, kw), out (N, O, Ho, Wo).
struct ConvShape {
  std::int64_t N, C, H, W, O, kh, kw, sh, sw, ph, pw, dh, dw, groups, Ho, Wo;
  std::int64_t Cg() const { return C / groups; }
  std::int64_t Og() const { return O / groups; }
  std::int64_t Kc() const { return Cg() * kh * kw; }  // rows of a group's columns
  std::int64_t L() const { return Ho * Wo; }          // output positions
  // A 1x1 kernel over every position: the input planes are the columns as they are.
  bool pointwise() const { return kh == 1 && kw == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0; }
};

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

// The output columns [lo, hi) whose input column ox * stride + offset lies inside [0, W).
std::pair<std::int64_t, std::int64_t> inside_columns(std::int64_t offset, std::int64_t stride, std::int64_t W,
                                                     std::int64_t Wo) {
  const std::int64_t lo = std::clamp<std::int64_t>(ceil_div(-offset, stride), 0, Wo);
  const std::int64_t hi = std::clamp<std::int64_t>(ceil_div(W - offset, stride), lo, Wo);
  return {lo, hi};
}

// Calls row_fn(k, i, j, row) for each row k = (c kh + i) kw + j of a group's columns, and then
// line_fn(row + oy Wo, input line or null for padding, lo, hi, x offset) for each output line.
template <class Line>
void for_each_column_line(const ConvShape& s, Line line_fn) {
  const std::int64_t L = s.L();
  for (std::int64_t c = 0; c < s.Cg(); ++c)
    for (std::int64_t i = 0; i < s.kh; ++i)
      for (std::int64_t j = 0; j < s.kw; ++j) {
        const std::int64_t row = ((c * s.kh + i) * s.kw + j) * L;
        const std::int64_t x_offset = j * s.dw - s.pw;
        const auto [lo, hi] = inside_columns(x_offset, s.sw, s.W, s.Wo);
        for (std::int64_t oy = 0; oy < s.Ho; ++oy) {
          const std::int64_t iy = oy * s.sh - s.ph + i * s.dh;
          const bool inside = iy >= 0 && iy < s.H;
          line_fn(row + oy * s.Wo, inside ? (c * s.H + iy) * s.W : -1, lo, hi, x_offset);
        }
      }
}

// col (Kc, L) from one group's input channels x (Cg, H, W); padding reads as 0.
void im2col(float* col, const float* x, const ConvShape& s) {
  for_each_column_line(s, [&](std::int64_t at, std::int64_t line, std::int64_t lo, std::int64_t hi, std::int64_t off) {
    float* out = col + at;
    if (line < 0) {
      std::fill_n(out, s.Wo, 0.0f);
      return;
    }
    const float* in = x + line + off;
    std::fill_n(out, lo, 0.0f);
    if (s.sw == 1) std::copy(in + lo, in + hi, out + lo);
    else
      for (std::int64_t ox = lo; ox < hi; ++ox) out[ox] = in[ox * s.sw];
    std::fill(out + hi, out + s.Wo, 0.0f);
  });
}

// dx (Cg, H, W) += the columns' gradients folded back onto the inputs they were read from.
void col2im(float* dx, const float* col, const ConvShape& s) {
  for_each_column_line(s, [&](std::int64_t at, std::int64_t line, std::int64_t lo, std::int64_t hi, std::int64_t off) {
    if (line < 0) return;
    const float* in = col + at;
    float* out = dx + line + off;
    for (std::int64_t ox = lo; ox < hi; ++ox) out[ox * s.sw] += in[ox];
  });
}

// The sizes of a conv2d of an input and a weight of these shapes; ValueError for bad ones.
ConvShape conv_geometry(const char* op, const Shape& x, const Shape& w, Size2 stride, Size2 padding, Size2 dilation,
                        std::int64_t groups) {
  if (x.size() != 4) throw ValueError(str(op, ": expected a 3-D or 4-D input, got ", shape_to_string(x)));
  if (w.size() != 4) throw ValueError(str(op, ": expected a 4-D weight (O, C / groups, kH, kW), got ", shape_to_string(w)));
  if (groups <= 0) throw ValueError(str(op, ": groups must be positive, got ", groups));
  for (int d = 0; d < 2; ++d) {
    check_window_arg(op, "input size", x[2 + static_cast<std::size_t>(d)]);
    check_window_arg(op, "kernel size", w[2 + static_cast<std::size_t>(d)]);
    check_window_arg(op, "stride", stride[d]);
    check_window_arg(op, "padding", padding[d]);
    check_window_arg(op, "dilation", dilation[d]);
    if (stride[d] <= 0) throw ValueError(str(op, ": stride must be positive, got ", stride[d]));
    if (dilation[d] <= 0) throw ValueError(str(op, ": dilation must be positive, got ", dilation[d]));
    if (padding[d] < 0) throw ValueError(str(op, ": padding must be non-negative, got ", padding[d]));
  }
  ConvShape s{x[0], x[1], x[2], x[3], w[0], w[2], w[3], stride[0], stride[1], padding[0], padding[1],
              dilation[0], dilation[1], groups, 0, 0};
  if (s.C % groups != 0 || s.O % groups != 0)
    throw ValueError(str(op, ": ", s.C, " input and ", s.O, " output channels must both divide by groups ", groups));
  if (w[1] != s.C / groups)
    throw ValueError(str(op, ": weight ", shape_to_string(w), " expects ", w[1] * groups, " input channels, but the input ",
                         shape_to_string(x), " has ", s.C));
  if (s.kh <= 0 || s.kw <= 0 || s.O <= 0) throw ValueError(str(op, ": empty weight ", shape_to_string(w)));
  s.Ho = (s.H + 2 * s.ph - s.dh * (s.kh - 1) - 1) / s.sh + 1;
  s.Wo = (s.W + 2 * s.pw - s.dw * (s.kw - 1) - 1) / s.sw + 1;
  if (s.H + 2 * s.ph - s.dh * (s.kh - 1) - 1 < 0 || s.W + 2 * s.pw - s.dw * (s.kw - 1) - 1 < 0)
    throw ValueError(str(op, ": the kernel (", s.kh, ", ", s.kw, ") with dilation (", s.dh, ", ", s.dw,
                         ") is larger than the padded input (", s.H + 2 * s.ph, ", ", s.W + 2 * s.pw, ")"));
  return s;
}

ConvShape conv_shape(const Tensor& x, const Tensor& w, const Tensor& b, Size2 stride, Size2 padding, Size2 dilation,
                     std::int64_t groups) {
  const char* op = "conv2d";
  if (x.dtype() != DType::F32 || w.dtype() != DType::F32 || (b.defined() && b.dtype() != DType::F32))
    throw TypeError(str(op, ": input, weight and bias must be F32, got ", dtype_name(x.dtype()), " and ",
                        dtype_name(w.dtype())));
  const ConvShape s = conv_geometry(op, x.shape(), w.shape(), stride, padding, dilation, groups);
  if (b.defined() && (b.dim() != 1 || b.shape()[0] != s.O))
    throw ValueError(str(op, ": bias must have shape (", s.O, "), got ", shape_to_string(b.shape())));
  return s;
}

// out (N, O, Ho, Wo) for contiguous x, w and b (maybe undefined); threaded over (sample, group).
Tensor conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, const ConvShape& s) {
  Tensor out = Tensor::empty(DType::F32, {s.N, s.O, s.Ho, s.Wo});
  const std::int64_t Cg = s.Cg(), Og = s.Og(), Kc = s.Kc(), L = s.L();
  if (out.numel() == 0) return out;
  const float* xd = x.data<float>();
  const float* wd = w.data<float>();
  const float* bd = b.defined() ? b.data<float>() : nullptr;
  float* od = out.data<float>();
  parallel_range(s.N * s.groups, Og * Kc * L, [&](std::int64_t begin, std::int64_t end) {
    const std::unique_ptr<float[]> col(s.pointwise() ? nullptr : new float[static_cast<std::size_t>(Kc * L)]);
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t n = item / s.groups, g = item % s.groups;
      const float* xg = xd + (n * s.C + g * Cg) * s.H * s.W;
      const float* columns = xg;
      if (!s.pointwise()) {
        im2col(col.get(), xg, s);  // writes every column, padding as 0
        columns = col.get();
      }
      float* og = od + (n * s.O + g * Og) * L;
      kernels::gemm_nn(og, L, wd + g * Og * Kc, Kc, columns, L, Og, L, Kc);
      if (bd)
        for (std::int64_t o = 0; o < Og; ++o) {
          const float bias = bd[g * Og + o];
          float* row = og + o * L;
          for (std::int64_t l = 0; l < L; ++l) row[l] += bias;
        }
    }
  });
  return out;
}

// dst (C, R) = src (R, C)^T, in 16x16 blocks that stay in cache.
void transpose(float* dst, const float* src, std::int64_t R, std::int64_t C) {
  constexpr std::int64_t kBlock = 16;
  for (std::int64_t r0 = 0; r0 < R; r0 += kBlock)
    for (std::int64_t c0 = 0; c0 < C; c0 += kBlock) {
      const std::int64_t r1 = std::min(r0 + kBlock, R), c1 = std::min(c0 + kBlock, C);
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t c = c0; c < c1; ++c) dst[c * R + r] = src[r * C + c];
    }
}

// The samples whose weight-gradient partials are held at once: at most about 8M floats.
std::int64_t weight_partial_samples(const ConvShape& s) {
  const std::int64_t per_sample = std::max<std::int64_t>(s.O * s.Kc(), 1);
  return std::clamp<std::int64_t>((std::int64_t{8} << 20) / per_sample, 1, std::max<std::int64_t>(s.N, 1));
}

// The gradients of conv2d's input, weight and bias from that of its output (undefined where
// `needs` says none is wanted). x, w and grad are contiguous.
std::vector<Tensor> conv2d_planes_backward(const Tensor& x, const Tensor& w, const Tensor& grad, const ConvShape& s,
                                           std::array<bool, 3> needs) {
  const std::int64_t Cg = s.Cg(), Og = s.Og(), Kc = s.Kc(), L = s.L();
  const float* xd = x.defined() ? x.data<float>() : nullptr;
  const float* wd = w.defined() ? w.data<float>() : nullptr;
  const float* gd = grad.data<float>();
  Tensor dx, dw, db;
  if (needs[0]) {
    // Each (sample, group) zeroes its own planes before folding onto them: a zeroed tensor of
    // this size is a fresh mapping whose pages the kernel clears on first touch, serially.
    dx = Tensor::empty(DType::F32, {s.N, s.C, s.H, s.W});
    float* dxd = dx.data<float>();
    parallel_range(s.N * s.groups, Og * Kc * L, [&](std::int64_t begin, std::int64_t end) {
      const std::unique_ptr<float[]> col(s.pointwise() ? nullptr : new float[static_cast<std::size_t>(Kc * L)]);
      for (std::int64_t item = begin; item < end; ++item) {
        const std::int64_t n = item / s.groups, g = item % s.groups;
        float* dxg = dxd + (n * s.C + g * Cg) * s.H * s.W;
        float* dcol = s.pointwise() ? dxg : col.get();
        kernels::gemm_tn(dcol, L, wd + g * Og * Kc, Kc, gd + (n * s.O + g * Og) * L, L, Kc, L, Og);
        if (s.pointwise()) continue;
        std::fill_n(dxg, Cg * s.H * s.W, 0.0f);
        col2im(dxg, dcol, s);
      }
    });
  }
  if (needs[1]) {
    dw = Tensor::zeros(DType::F32, {s.O, Cg, s.kh, s.kw});
    float* dwd = dw.data<float>();
    const std::int64_t per_sample = s.O * Kc, chunk = weight_partial_samples(s);
    // Uninitialized (each partial is written whole by its product), from the tensor block
    // cache: a zero-filled vector of this size cost a page fault per page at every backward.
    Tensor partial_block = Tensor::empty(DType::F32, {chunk * per_sample});
    float* const partial = partial_block.data<float>();
    for (std::int64_t first = 0; first < s.N; first += chunk) {
      const std::int64_t count = std::min(chunk, s.N - first);
      parallel_range(count * s.groups, Og * Kc * L, [&](std::int64_t begin, std::int64_t end) {
        const std::unique_ptr<float[]> col(s.pointwise() ? nullptr : new float[static_cast<std::size_t>(Kc * L)]);
        const std::unique_ptr<float[]> rows(new float[static_cast<std::size_t>(Kc * L)]);
        for (std::int64_t item = begin; item < end; ++item) {
          const std::int64_t k = item / s.groups, g = item % s.groups, n = first + k;
          const float* xg = xd + (n * s.C + g * Cg) * s.H * s.W;
          const float* columns = xg;
          if (!s.pointwise()) {
            im2col(col.get(), xg, s);
            columns = col.get();
          }
          // dW_g = dy_g (Og, L) @ columns^T: the columns transposed into rows (L, Kc) once, so
          // that the product streams both operands along their rows.
          transpose(rows.get(), columns, Kc, L);
          kernels::gemm_nn(partial + k * per_sample + g * Og * Kc, Kc, gd + (n * s.O + g * Og) * L, L, rows.get(), Kc,
                           Og, Kc, L);
        }
      });
      // Added in sample order, each weight on its own: the same sums whatever the threads.
      parallel_range(per_sample, count, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t k = 0; k < count; ++k) {
          const float* p = partial + k * per_sample;
          for (std::int64_t j = begin; j < end; ++j) dwd[j] += p[j];
        }
      });
    }
  }
  if (needs[2]) {
    db = Tensor::empty(DType::F32, {s.O});
    float* dbd = db.data<float>();
    parallel_range(s.O, s.N * L, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t o = begin; o < end; ++o) {
        double total = 0;
        for (std::int64_t n = 0; n < s.N; ++n) {
          const float* row = gd + (n * s.O + o) * L;
          for (std::int64_t l = 0; l < L; ++l) total += row[l];
        }
        dbd[o] = static_cast<float>(total);
      }
    });
  }
  return {dx, dw, db};
}

}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, Size2 stride, Size2 padding,
              Size2 dilation, std::int64_t groups) {
  if (input.dim() == 3) {  // unbatched (C, H, W)
    return conv2d(input.unsqueeze(0), weight, bias, stride, padding, dilation, groups).squeeze(0);
  }
  const ConvShape s = conv_shape(input, weight, bias, stride, padding, dilation, groups);
  const Tensor x = dense(input.detach()), w = dense(weight.detach());
  const Tensor b = bias.defined() ? dense(bias.detach()) : Tensor();
  Tensor out = conv2d_forward(x, w, b, s);
  if (!autograd::any_requires_grad({&input, &weight, &bias})) return out;
  const std::array<bool, 3> needs{input.requires_grad(), weight.requires_grad(), bias.defined() && bias.requires_grad()};
  // x is needed for dW only, w for dx only.
  const autograd::SavedTensor sx(needs[1] ? x : Tensor()), sw(needs[0] ? w : Tensor());
  const Shape x_shape = x.shape(), w_shape = w.shape();
  return autograd::record("conv2d", std::move(out), {&input, &weight, &bias},
                          [sx, sw, x_shape, w_shape, stride, padding, dilation, groups, needs](const Tensor& g) {
    const Tensor xs = needs[1] ? sx.get("conv2d") : Tensor(), ws = needs[0] ? sw.get("conv2d") : Tensor();
    return conv2d_backward(g, xs, ws, x_shape, w_shape, stride, padding, dilation, groups, needs);
  });
}

std::vector<Tensor> tensor_detail::conv2d_backward(const Tensor& g, const Tensor& input, const Tensor& weight,
                                                   const Shape& input_shape, const Shape& weight_shape, Size2 stride,
                                                   Size2 padding, Size2 dilation, std::int64_t groups,
                                                   std::array<bool, 3> output_mask) {
  const char* op = "conv2d_backward";
  const ConvShape s = conv_geometry(op, input_shape, weight_shape, stride, padding, dilation, groups);
  if (g.dtype() != DType::F32 || g.shape() != Shape{s.N, s.O, s.Ho, s.Wo})
    throw ValueError(str(op, ": expected an F32 g of shape ", shape_to_string(Shape{s.N, s.O, s.Ho, s.Wo}), ", got ",
                         dtype_name(g.dtype()), " ", shape_to_string(g.shape())));
  // The input is read for dweight, the weight for dinput.
  const auto check = [&](const Tensor& t, const Shape& shape, bool read, const char* name) {
    if (read && (!t.defined() || t.dtype() != DType::F32 || t.shape() != shape))
      throw ValueError(str(op, ": needs the F32 ", name, " of shape ", shape_to_string(shape)));
  };
  check(input, input_shape, output_mask[1], "input");
  check(weight, weight_shape, output_mask[0], "weight");
  return conv2d_planes_backward(output_mask[1] ? dense(input) : Tensor(), output_mask[0] ? dense(weight) : Tensor(),
                                dense(g), s, output_mask);
}

Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, std::int64_t stride, std::int64_t padding,
              std::int64_t dilation, std::int64_t groups) {
  if (input.dim() != 2 && input.dim() != 3)
    throw ValueError(str("conv1d: expected a 2-D or 3-D input, got ", shape_to_string(input.shape())));
  if (weight.dim() != 3)
    throw ValueError(str("conv1d: expected a 3-D weight (O, C / groups, k), got ", shape_to_string(weight.shape())));
  const int at = input.dim() - 1;  // the new height-1 dim, before the length
  return conv2d(input.unsqueeze(at), weight.unsqueeze(2), bias, {1, stride}, {0, padding}, {1, dilation}, groups)
      .squeeze(at);
}

}  // namespace kael
