// The recurrent layers' computation (tensor/rnn.hpp): each layer's input products for all time
// steps in one linear(), then per step the hidden product and the fused cell.
#include <cstring>
#include <string>

#include "kael/core/error.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "kael/tensor/rnn.hpp"
#include "kernels/gemm.hpp"
#include "tensor/backward.hpp"
#include "tensor/rnn_cells.hpp"
#include "tensor/strided.hpp"

namespace kael {

namespace {

enum class Cell { tanh, relu, lstm, gru };

Cell cell_of(std::string_view mode) {
  if (mode == "RNN_TANH") return Cell::tanh;
  if (mode == "RNN_RELU") return Cell::relu;
  if (mode == "LSTM") return Cell::lstm;
  if (mode == "GRU") return Cell::gru;
  throw ValueError(str("rnn: unknown mode '", mode, "' (RNN_TANH, RNN_RELU, LSTM or GRU)"));
}

std::int64_t gate_count(Cell cell) { return cell == Cell::lstm ? 4 : cell == Cell::gru ? 3 : 1; }

// One step from the input's products gi (B, G H) and the state; c is read and replaced for LSTM.
Tensor step(Cell cell, const Tensor& gi, const Tensor& h, Tensor& c, const Tensor& w_hh, const Tensor& b_hh) {
  const Tensor gh = linear(h, w_hh, b_hh);
  switch (cell) {
    case Cell::tanh: return tanh(add(gi, gh));
    case Cell::relu: return relu(add(gi, gh));
    case Cell::gru: return gru_cell_fused(gi, gh, h);
    case Cell::lstm: {
      auto [h_next, c_next] = lstm_cell_fused(add(gi, gh), c);
      c = c_next;
      return h_next;
    }
  }
  return h;
}

// A cell's one step for the torch.*_cell functions: input (B, in) or (in).
Tensor one_step(Cell cell, const Tensor& input, const Tensor& hx, Tensor& cx, const Tensor& w_ih, const Tensor& w_hh,
                const Tensor& b_ih, const Tensor& b_hh) {
  const bool unbatched = input.dim() == 1;
  const Tensor x = unbatched ? input.unsqueeze(0) : input;
  const Tensor h = unbatched ? hx.unsqueeze(0) : hx;
  Tensor c = cx.defined() && unbatched ? cx.unsqueeze(0) : cx;
  Tensor out = step(cell, linear(x, w_ih, b_ih), h, c, w_hh, b_hh);
  if (cx.defined()) cx = unbatched ? c.squeeze(0) : c;
  return unbatched ? out.squeeze(0) : out;
}

// The F32 forward of lstm_layer's T steps into gates_all (T, B, 4H), hs and cs (T + 1, B, H),
// whose step 0 holds the initial state: W_hh packed once into the kernel table's panels (per
// step, linear() packed its transpose again), then per step gates = gi_t + (h W_hh^T + b_hh),
// the product's residual epilogue adding it onto gi_t's copy (add(gi_t, linear(h, W_hh, b_hh))'s
// bits), and the cell written straight into hs and cs.
void lstm_steps_f32(Tensor& gates_all, Tensor& hs, Tensor& cs, const Tensor& gi, const Tensor& w, const Tensor& b) {
  const std::int64_t T = gates_all.shape()[0], B = gates_all.shape()[1], G = gates_all.shape()[2], H = G / 4;
  if (B == 0 || H == 0) return;
  Tensor packed = Tensor::empty(DType::F32, {G * H});
  kernels::pack_panels_transposed(packed.data<float>(), w.data<float>(), H, G);
  const float* bias = b.defined() ? b.data<float>() : nullptr;
  float* h = hs.data<float>();
  float* c = cs.data<float>();
  for (std::int64_t t = 0; t < T; ++t) {
    float* gates = gates_all.data<float>() + t * B * G;
    std::memcpy(gates, gi.data<float>() + t * B * G, static_cast<std::size_t>(B * G) * sizeof(float));
    kernels::linear_packed(gates, h + t * B * H, packed.data<float>(), bias, B, H, G, kernels::Epilogue::residual);
    tensor_detail::lstm_cell_forward(h + (t + 1) * B * H, c + (t + 1) * B * H, H, gates, c + t * B * H, B, H);
  }
}

// One LSTM layer's T > 0 steps as one autograd node over its input products gi_all (T, B, 4H):
// per-step ops would each record a select of gi_all, whose backward writes a zeroed gi_all-sized
// gradient (O(T^2) per layer), and a hidden product whose weight gradient is summed T times.
// Here the backward (tensor_detail::lstm_backward) runs the cells' backwards in reverse and
// takes W_hh's and b_hh's gradients over all steps in one product. Returns (T + 2, B, H): every step's h, then h_n, then c_n.
Tensor lstm_layer(const Tensor& gi_all, const Tensor& h0, const Tensor& c0, const Tensor& w_hh, const Tensor& b_hh) {
  using tensor_detail::dense;
  const std::int64_t T = gi_all.shape()[0], B = gi_all.shape()[1], H = h0.shape()[1];
  const DType dt = gi_all.dtype();
  Tensor packed = Tensor::empty(dt, {T + 2, B, H});
  Tensor gates_all = Tensor::empty(dt, {T, B, 4 * H});  // each step's gates before the nonlinearities
  Tensor hs = Tensor::empty(dt, {T + 1, B, H}), cs = Tensor::empty(dt, {T + 1, B, H});  // states before each step
  {
    autograd::NoGradGuard no_grad;
    const Tensor gi = gi_all.detach(), w = w_hh.detach(), b = b_hh.defined() ? b_hh.detach() : Tensor();
    hs.select(0, 0).copy_(h0.detach());
    cs.select(0, 0).copy_(c0.detach());
    const bool f32 = dt == DType::F32 && w.dtype() == DType::F32 && (!b.defined() || b.dtype() == DType::F32);
    if (f32) lstm_steps_f32(gates_all, hs, cs, dense(gi), dense(w), b.defined() ? dense(b) : b);
    for (std::int64_t t = 0; t < T && !f32; ++t) {
      Tensor gates = gates_all.select(0, t);
      gates.copy_(add(gi.select(0, t), linear(hs.select(0, t), w, b)));
      const auto [h_next, c_next] = lstm_cell_fused(gates, cs.select(0, t));
      hs.select(0, t + 1).copy_(h_next);
      cs.select(0, t + 1).copy_(c_next);
    }
    packed.narrow(0, 0, T).copy_(hs.narrow(0, 1, T));
    packed.select(0, T).copy_(hs.select(0, T));
    packed.select(0, T + 1).copy_(cs.select(0, T));
  }
  if (!autograd::any_requires_grad({&gi_all, &h0, &c0, &w_hh, &b_hh})) return packed;
  const autograd::SavedTensor saved_w(w_hh);
  const bool has_bias = b_hh.defined();
  return autograd::record("lstm", std::move(packed), {&gi_all, &h0, &c0, &w_hh, &b_hh},
                          [saved_w, gates_all, hs, cs, has_bias](const Tensor& g) {
                            return tensor_detail::lstm_backward(g, saved_w.get("lstm"), gates_all, hs, cs, has_bias);
                          });
}

}  // namespace

std::vector<Tensor> tensor_detail::lstm_backward(const Tensor& g, const Tensor& w_hh, const Tensor& gates_all,
                                                 const Tensor& hs, const Tensor& cs, bool has_bias) {
  const std::int64_t T = gates_all.dim() == 3 ? gates_all.shape()[0] : 0, B = T ? gates_all.shape()[1] : 0;
  const std::int64_t H = hs.dim() == 3 ? hs.shape()[2] : 0;
  if (T <= 0 || gates_all.shape() != Shape{T, B, 4 * H} || hs.shape() != Shape{T + 1, B, H} || cs.shape() != hs.shape() ||
      g.shape() != Shape{T + 2, B, H} || w_hh.shape() != Shape{4 * H, H})
    throw ValueError(str("lstm_backward: expected gates_all (T > 0, B, 4H), hs and cs (T + 1, B, H), g (T + 2, B, H) "
                         "and w_hh (4H, H), got gates_all ", shape_to_string(gates_all.shape()), ", hs ",
                         shape_to_string(hs.shape()), ", cs ", shape_to_string(cs.shape()), ", g ",
                         shape_to_string(g.shape()), " and w_hh ", shape_to_string(w_hh.shape())));
  const Tensor grad = dense(g);
  Tensor d_gates_all = Tensor::empty(grad.dtype(), {T, B, 4 * H});
  Tensor d_out = Tensor::empty(grad.dtype(), {B, 2 * H});  // [dh' | dc'] of the step
  Tensor dh = grad.select(0, T), dc = grad.select(0, T + 1);
  for (std::int64_t t = T - 1; t >= 0; --t) {
    d_out.narrow(1, 0, H).copy_(add(grad.select(0, t), dh));
    d_out.narrow(1, H, H).copy_(dc);
    std::vector<Tensor> d = lstm_cell_backward(d_out, gates_all.select(0, t), cs.select(0, t));
    d_gates_all.select(0, t).copy_(d[0]);
    dh = matmul(d[0], w_hh);
    dc = d[1];
  }
  const Tensor d_rows = d_gates_all.reshape({T * B, 4 * H});
  Tensor d_w = matmul(d_rows.transpose(0, 1), hs.narrow(0, 0, T).reshape({T * B, H}));
  Tensor d_b = has_bias ? sum(d_rows, {0}) : Tensor();
  return {d_gates_all, dh.contiguous(), dc.contiguous(), d_w, d_b};
}

std::pair<Tensor, Tensor> lstm_cell(const Tensor& input, const Tensor& hx, const Tensor& cx, const Tensor& w_ih,
                                    const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh) {
  Tensor c = cx;
  Tensor h = one_step(Cell::lstm, input, hx, c, w_ih, w_hh, b_ih, b_hh);
  return {h, c};
}

Tensor gru_cell(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                const Tensor& b_hh) {
  Tensor none;
  return one_step(Cell::gru, input, hx, none, w_ih, w_hh, b_ih, b_hh);
}

Tensor rnn_tanh_cell(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                     const Tensor& b_hh) {
  Tensor none;
  return one_step(Cell::tanh, input, hx, none, w_ih, w_hh, b_ih, b_hh);
}

Tensor rnn_relu_cell(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                     const Tensor& b_hh) {
  Tensor none;
  return one_step(Cell::relu, input, hx, none, w_ih, w_hh, b_ih, b_hh);
}

RnnResult rnn(std::string_view mode, const Tensor& input, const Tensor& hx, const Tensor& cx,
              const std::vector<Tensor>& params, bool has_biases, std::int64_t num_layers, double dropout, bool training,
              bool batch_first) {
  const Cell cell = cell_of(mode);
  const char* op = "rnn";
  const std::size_t per_layer = has_biases ? 4 : 2;
  if (num_layers <= 0) throw ValueError(str(op, ": num_layers must be positive, got ", num_layers));
  if (params.size() != per_layer * static_cast<std::size_t>(num_layers))
    throw ValueError(str(op, ": expected ", per_layer * static_cast<std::size_t>(num_layers), " parameters for ",
                         num_layers, " layers, got ", params.size()));
  if (!(dropout >= 0.0 && dropout <= 1.0)) throw ValueError(str(op, ": dropout must be in [0, 1], got ", dropout));
  if (input.dim() != 2 && input.dim() != 3)
    throw ValueError(str(op, ": expected a 2-D (unbatched) or 3-D input, got ", shape_to_string(input.shape())));
  const bool unbatched = input.dim() == 2;
  Tensor x = unbatched ? input.unsqueeze(1) : batch_first ? input.transpose(0, 1) : input;  // (T, B, in)
  const std::int64_t T = x.shape()[0], B = x.shape()[1];
  const std::int64_t H = params[1].dim() == 2 ? params[1].shape()[1] : 0;
  const std::int64_t G = gate_count(cell);
  for (std::int64_t l = 0; l < num_layers; ++l) {
    const Tensor& w_ih = params[per_layer * static_cast<std::size_t>(l)];
    const Tensor& w_hh = params[per_layer * static_cast<std::size_t>(l) + 1];
    const std::int64_t in = l == 0 ? x.shape()[2] : H;
    if (w_ih.dim() != 2 || w_ih.shape()[0] != G * H || w_ih.shape()[1] != in || w_hh.dim() != 2 ||
        w_hh.shape()[0] != G * H || w_hh.shape()[1] != H)
      throw ValueError(str(op, ": layer ", l, " expects weights (", G * H, ", ", in, ") and (", G * H, ", ", H,
                           "), got ", shape_to_string(w_ih.shape()), " and ", shape_to_string(w_hh.shape())));
  }
  const auto state_of = [&](const Tensor& given, const char* name) {
    const Shape want{num_layers, B, H};
    if (!given.defined()) return zeros(want, x.dtype());
    const Tensor s = unbatched ? given.unsqueeze(1) : given;
    if (s.shape() != want)
      throw ValueError(str(op, ": expected ", name, " of shape ", shape_to_string(unbatched ? Shape{num_layers, H} : want),
                           ", got ", shape_to_string(given.shape())));
    return s;
  };
  const Tensor h0 = state_of(hx, "hx"), c0 = cell == Cell::lstm ? state_of(cx, "cx") : Tensor();
  std::vector<Tensor> h_last, c_last;
  for (std::int64_t l = 0; l < num_layers; ++l) {
    const std::size_t at = per_layer * static_cast<std::size_t>(l);
    const Tensor b_ih = has_biases ? params[at + 2] : Tensor(), b_hh = has_biases ? params[at + 3] : Tensor();
    const Tensor gi_all = linear(x, params[at], b_ih);  // (T, B, G H): every step's input product at once
    Tensor h = h0.select(0, l);
    Tensor c = cell == Cell::lstm ? c0.select(0, l) : Tensor();
    if (cell == Cell::lstm && T > 0) {
      const Tensor packed = lstm_layer(gi_all, h, c, params[at + 1], b_hh);
      x = packed.narrow(0, 0, T);
      if (dropout > 0.0 && training && l + 1 < num_layers) x = kael::dropout(x, dropout, true);
      h_last.push_back(packed.select(0, T));
      c_last.push_back(packed.select(0, T + 1));
      continue;
    }
    std::vector<Tensor> outputs;
    outputs.reserve(static_cast<std::size_t>(T));
    for (std::int64_t t = 0; t < T; ++t) {
      h = step(cell, gi_all.select(0, t), h, c, params[at + 1], b_hh);
      outputs.push_back(h);
    }
    x = T > 0 ? stack(outputs, 0) : zeros({0, B, H}, x.dtype());
    if (dropout > 0.0 && training && l + 1 < num_layers) x = kael::dropout(x, dropout, true);
    h_last.push_back(h);
    if (cell == Cell::lstm) c_last.push_back(c);
  }
  RnnResult result;
  result.output = unbatched ? x.squeeze(1) : batch_first ? x.transpose(0, 1) : x;
  result.h_n = stack(h_last, 0);
  if (cell == Cell::lstm) result.c_n = stack(c_last, 0);
  if (unbatched) {
    result.h_n = result.h_n.squeeze(1);
    if (result.c_n.defined()) result.c_n = result.c_n.squeeze(1);
  }
  return result;
}

}  // namespace kael
