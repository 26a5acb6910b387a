// The fused LSTM and GRU cells (tensor/rnn.hpp). Each saves its inputs and recomputes the gate
// activations in its backward, one pass over the (B, H) elements either way.
#include "kael/tensor/rnn.hpp"

#include <cmath>
#include <vector>

#include "kael/core/error.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "kernels/dispatch/kernel_table.hpp"
#include "tensor/backward.hpp"
#include "tensor/rnn_cells.hpp"
#include "tensor/parallel.hpp"
#include "tensor/strided.hpp"

namespace kael {

using namespace tensor_detail;

namespace {

template <class T>
T sigmoid_of(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// The four gate activations of element j of one row of gates (4H), as the plain path computes them.
template <class T>
struct LstmGates {
  T i, f, g, o;
};

template <class T>
LstmGates<T> lstm_gates_at(const T* row, std::int64_t H, std::int64_t j) {
  return {sigmoid_of(row[j]), sigmoid_of(row[H + j]), std::tanh(row[2 * H + j]), sigmoid_of(row[3 * H + j])};
}

// Calls f.template operator()<T>() with float for F32, double for F64.
template <class F>
void dispatch_floating(DType dtype, F&& f) {
  if (dtype == DType::F64) f.template operator()<double>();
  else f.template operator()<float>();
}

void check_cell(const char* op, const Tensor& gates, std::int64_t gate_count, const Tensor& state) {
  if (gates.dtype() != DType::F32 && gates.dtype() != DType::F64)
    throw TypeError(str(op, ": gates must be F32 or F64, got ", dtype_name(gates.dtype())));
  if (state.dtype() != gates.dtype())
    throw TypeError(str(op, ": the state's dtype ", dtype_name(state.dtype()), " differs from the gates' ",
                        dtype_name(gates.dtype())));
  if (gates.dim() != 2 || state.dim() != 2 || gates.shape()[0] != state.shape()[0] ||
      gates.shape()[1] != gate_count * state.shape()[1])
    throw ValueError(str(op, ": expected gates (B, ", gate_count, " H) and a state (B, H), got ",
                         shape_to_string(gates.shape()), " and ", shape_to_string(state.shape())));
}

// act (4H) = the activations [sigmoid(i) | sigmoid(f) | tanh(g) | sigmoid(o)] of one F32 row of
// gates (4H), a pass per gate on the kernel table's vector sigmoid and tanh: the C library's
// scalar tanhf and expf, called per element, took most of the cell's time.
void lstm_activations(float* act, const float* row, std::int64_t H, const kernels::KernelTable& kt) {
  kt.sigmoid(act, row, 2 * H);
  kt.tanh(act + 2 * H, row + 2 * H, H);
  kt.sigmoid(act + 3 * H, row + 3 * H, H);
}

// out (B, 2H) = [h' | c'].
Tensor lstm_forward(const Tensor& gates, const Tensor& c) {
  const std::int64_t B = c.shape()[0], H = c.shape()[1];
  Tensor out = Tensor::empty(gates.dtype(), {B, 2 * H});
  if (gates.dtype() == DType::F32) {
    float* o = out.data<float>();
    lstm_cell_forward(o, o + H, 2 * H, gates.data<float>(), c.data<float>(), B, H);
    return out;
  }
  dispatch_floating(gates.dtype(), [&]<class T>() {
    const T* a = gates.data<T>();
    const T* cp = c.data<T>();
    T* o = out.data<T>();
    parallel_range(B, 16 * H, [&](std::int64_t b0, std::int64_t b1) {
      for (std::int64_t b = b0; b < b1; ++b)
        for (std::int64_t j = 0; j < H; ++j) {
          const auto [i, f, g, og] = lstm_gates_at(a + b * 4 * H, H, j);
          const T cn = f * cp[b * H + j] + i * g;
          o[b * 2 * H + j] = og * std::tanh(cn);
          o[b * 2 * H + H + j] = cn;
        }
    });
  });
  return out;
}

}  // namespace

void tensor_detail::lstm_cell_forward(float* h_next, float* c_next, std::int64_t ld_out, const float* gates,
                                      const float* c, std::int64_t B, std::int64_t H) {
  const kernels::KernelTable& kt = kernels::active_kernels();
  parallel_range(B, 16 * H, [&](std::int64_t b0, std::int64_t b1) {
    std::vector<float> act(static_cast<std::size_t>(4 * H));
    for (std::int64_t b = b0; b < b1; ++b) {
      lstm_activations(act.data(), gates + b * 4 * H, H, kt);
      float* h = h_next + b * ld_out;
      float* cn = c_next + b * ld_out;
      for (std::int64_t j = 0; j < H; ++j) cn[j] = act[H + j] * c[b * H + j] + act[j] * act[2 * H + j];
      kt.tanh(h, cn, H);
      for (std::int64_t j = 0; j < H; ++j) h[j] *= act[3 * H + j];
    }
  });
}

std::vector<Tensor> tensor_detail::lstm_cell_backward(const Tensor& grad_in, const Tensor& gates_in,
                                                     const Tensor& c_in) {
  check_cell("lstm_cell_backward", gates_in, 4, c_in);
  if (grad_in.dtype() != gates_in.dtype() || grad_in.shape() != Shape{c_in.shape()[0], 2 * c_in.shape()[1]})
    throw ValueError(str("lstm_cell_backward: expected g (B, 2H) of the gates' dtype for a state ",
                         shape_to_string(c_in.shape()), ", got ", shape_to_string(grad_in.shape())));
  const Tensor gates = dense(gates_in), c = dense(c_in), grad = dense(grad_in);
  const std::int64_t B = c.shape()[0], H = c.shape()[1];
  Tensor d_gates = Tensor::empty(gates.dtype(), gates.shape()), d_c = Tensor::empty(c.dtype(), c.shape());
  if (gates.dtype() == DType::F32) {
    const float* a = gates.data<float>();
    const float* cp = c.data<float>();
    const float* g_out = grad.data<float>();
    float* da = d_gates.data<float>();
    float* dc = d_c.data<float>();
    const kernels::KernelTable& kt = kernels::active_kernels();
    parallel_range(B, 24 * H, [&](std::int64_t b0, std::int64_t b1) {
      std::vector<float> act(static_cast<std::size_t>(4 * H)), tc(static_cast<std::size_t>(H));
      for (std::int64_t b = b0; b < b1; ++b) {
        lstm_activations(act.data(), a + b * 4 * H, H, kt);
        const float* c_prev = cp + b * H;
        for (std::int64_t j = 0; j < H; ++j) tc[j] = act[H + j] * c_prev[j] + act[j] * act[2 * H + j];
        kt.tanh(tc.data(), tc.data(), H);
        const float* dh = g_out + b * 2 * H;
        float* drow = da + b * 4 * H;
        for (std::int64_t j = 0; j < H; ++j) {
          const float i = act[j], f = act[H + j], g = act[2 * H + j], og = act[3 * H + j], t = tc[j];
          const float dcn = dh[H + j] + dh[j] * og * (1.0f - t * t);
          drow[j] = dcn * g * i * (1.0f - i);
          drow[H + j] = dcn * c_prev[j] * f * (1.0f - f);
          drow[2 * H + j] = dcn * i * (1.0f - g * g);
          drow[3 * H + j] = dh[j] * t * og * (1.0f - og);
          dc[b * H + j] = dcn * f;
        }
      }
    });
    return {d_gates, d_c};
  }
  dispatch_floating(gates.dtype(), [&]<class T>() {
    const T* a = gates.data<T>();
    const T* cp = c.data<T>();
    const T* g_out = grad.data<T>();
    T* da = d_gates.data<T>();
    T* dc = d_c.data<T>();
    parallel_range(B, 24 * H, [&](std::int64_t b0, std::int64_t b1) {
      for (std::int64_t b = b0; b < b1; ++b)
        for (std::int64_t j = 0; j < H; ++j) {
          const auto [i, f, g, og] = lstm_gates_at(a + b * 4 * H, H, j);
          const T c_prev = cp[b * H + j];
          const T tc = std::tanh(f * c_prev + i * g);
          const T dh = g_out[b * 2 * H + j];
          const T dcn = g_out[b * 2 * H + H + j] + dh * og * (T(1) - tc * tc);
          T* drow = da + b * 4 * H;
          drow[j] = dcn * g * i * (T(1) - i);
          drow[H + j] = dcn * c_prev * f * (T(1) - f);
          drow[2 * H + j] = dcn * i * (T(1) - g * g);
          drow[3 * H + j] = dh * tc * og * (T(1) - og);
          dc[b * H + j] = dcn * f;
        }
    });
  });
  return {d_gates, d_c};
}

std::vector<Tensor> tensor_detail::gru_cell_backward(const Tensor& grad_in, const Tensor& gi_in, const Tensor& gh_in,
                                                    const Tensor& h_in) {
  check_cell("gru_cell_backward", gi_in, 3, h_in);
  if (gh_in.shape() != gi_in.shape() || gh_in.dtype() != gi_in.dtype() || grad_in.shape() != h_in.shape() ||
      grad_in.dtype() != gi_in.dtype())
    throw ValueError(str("gru_cell_backward: expected gh of gi's shape and dtype and g of h's, got gi ",
                         shape_to_string(gi_in.shape()), ", gh ", shape_to_string(gh_in.shape()), ", h ",
                         shape_to_string(h_in.shape()), " and g ", shape_to_string(grad_in.shape())));
  const Tensor gi = dense(gi_in), gh = dense(gh_in), h = dense(h_in), grad = dense(grad_in);
  const std::int64_t B = h.shape()[0], H = h.shape()[1];
  Tensor d_gi = Tensor::empty(gi.dtype(), gi.shape()), d_gh = Tensor::empty(gi.dtype(), gi.shape());
  Tensor d_h = Tensor::empty(h.dtype(), h.shape());
  dispatch_floating(gi.dtype(), [&]<class T>() {
    const T* xi = gi.data<T>();
    const T* xh = gh.data<T>();
    const T* hp = h.data<T>();
    const T* go = grad.data<T>();
    T* dxi = d_gi.data<T>();
    T* dxh = d_gh.data<T>();
    T* dh = d_h.data<T>();
    parallel_range(B, 24 * H, [&](std::int64_t b0, std::int64_t b1) {
      for (std::int64_t b = b0; b < b1; ++b)
        for (std::int64_t j = 0; j < H; ++j) {
          const std::int64_t at = b * 3 * H + j;
          const T r = sigmoid_of(xi[at] + xh[at]), z = sigmoid_of(xi[at + H] + xh[at + H]);
          const T hn = xh[at + 2 * H];
          const T n = std::tanh(xi[at + 2 * H] + r * hn);
          const T g = go[b * H + j];
          const T da_n = g * (T(1) - z) * (T(1) - n * n);
          const T da_z = g * (hp[b * H + j] - n) * z * (T(1) - z);
          const T da_r = da_n * hn * r * (T(1) - r);
          dxi[at] = da_r;
          dxh[at] = da_r;
          dxi[at + H] = da_z;
          dxh[at + H] = da_z;
          dxi[at + 2 * H] = da_n;
          dxh[at + 2 * H] = da_n * r;
          dh[b * H + j] = g * z;
        }
    });
  });
  return {d_gi, d_gh, d_h};
}

std::pair<Tensor, Tensor> lstm_cell_fused(const Tensor& gates, const Tensor& c) {
  check_cell("lstm_cell", gates, 4, c);
  const Tensor a = dense(gates.detach()), cs = dense(c.detach());
  Tensor out = lstm_forward(a, cs);
  if (autograd::any_requires_grad({&gates, &c})) {
    const autograd::SavedTensor sa(a), sc(cs);
    out = autograd::record("lstm_cell", std::move(out), {&gates, &c}, [sa, sc](const Tensor& g) {
      return lstm_cell_backward(g, sa.get("lstm_cell"), sc.get("lstm_cell"));
    });
  }
  const std::int64_t H = c.shape()[1];
  return {out.narrow(1, 0, H), out.narrow(1, H, H)};
}

Tensor gru_cell_fused(const Tensor& gi, const Tensor& gh, const Tensor& h) {
  check_cell("gru_cell", gi, 3, h);
  if (gh.shape() != gi.shape() || gh.dtype() != gi.dtype())
    throw ValueError(str("gru_cell: gi ", shape_to_string(gi.shape()), " and gh ", shape_to_string(gh.shape()),
                         " must have one shape and dtype"));
  const Tensor xi = dense(gi.detach()), xh = dense(gh.detach()), hs = dense(h.detach());
  const std::int64_t B = h.shape()[0], H = h.shape()[1];
  Tensor out = Tensor::empty(gi.dtype(), {B, H});
  dispatch_floating(gi.dtype(), [&]<class T>() {
    const T* a = xi.data<T>();
    const T* r_h = xh.data<T>();
    const T* hp = hs.data<T>();
    T* o = out.data<T>();
    parallel_range(B, 16 * H, [&](std::int64_t b0, std::int64_t b1) {
      for (std::int64_t b = b0; b < b1; ++b)
        for (std::int64_t j = 0; j < H; ++j) {
          const std::int64_t at = b * 3 * H + j;
          const T r = sigmoid_of(a[at] + r_h[at]), z = sigmoid_of(a[at + H] + r_h[at + H]);
          const T n = std::tanh(a[at + 2 * H] + r * r_h[at + 2 * H]);
          o[b * H + j] = (T(1) - z) * n + z * hp[b * H + j];
        }
    });
  });
  if (!autograd::any_requires_grad({&gi, &gh, &h})) return out;
  const autograd::SavedTensor si(xi), sh(xh), sp(hs);
  return autograd::record("gru_cell", std::move(out), {&gi, &gh, &h}, [si, sh, sp](const Tensor& g) {
    return gru_cell_backward(g, si.get("gru_cell"), sh.get("gru_cell"), sp.get("gru_cell"));
  });
}

}  // namespace kael
