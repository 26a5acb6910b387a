// The recurrent layers' native half: rnn() over a whole sequence (python/kael/nn/rnn.py's RNN,
// LSTM and GRU call it with their parameters), torch's one-step cell functions, and the C++
// layer whose initialized parameters the Python modules take.
#include <pybind11/stl.h>

#include <optional>

#include "bindings.hpp"
#include "convert.hpp"
#include "kael/core/error.hpp"
#include "kael/nn/rnn.hpp"
#include "kael/tensor/rnn.hpp"

namespace py = pybind11;

namespace kael::python {

void init_rnn(py::module_& m) {
  m.def(
      "_rnn",
      [](const std::string& mode, const Tensor& input, const std::optional<Tensor>& hx, const std::optional<Tensor>& cx,
         const std::vector<Tensor>& params, bool has_biases, std::int64_t num_layers, double dropout, bool training,
         bool batch_first) {
        RnnResult r;
        {
          py::gil_scoped_release release;
          r = rnn(mode, input, tensor_or_undefined(hx), tensor_or_undefined(cx), params, has_biases, num_layers, dropout, training,
                  batch_first);
        }
        return py::make_tuple(r.output, r.h_n, tensor_or_none(r.c_n));
      },
      "mode"_a, "input"_a, "hx"_a, "cx"_a, "params"_a, "has_biases"_a, "num_layers"_a, "dropout"_a, "training"_a,
      "batch_first"_a, "The whole sequence through an RNN / LSTM / GRU: (output, h_n, c_n or None).");
  m.def(
      "lstm_cell",
      [](const Tensor& input, const std::vector<Tensor>& hx, const Tensor& w_ih, const Tensor& w_hh,
         const std::optional<Tensor>& b_ih, const std::optional<Tensor>& b_hh) {
        if (hx.size() != 2) throw ValueError(str("lstm_cell: hx must be a pair (h, c), got ", hx.size(), " tensors"));
        auto [h, c] = lstm_cell(input, hx[0], hx[1], w_ih, w_hh, tensor_or_undefined(b_ih), tensor_or_undefined(b_hh));
        return py::make_tuple(h, c);
      },
      "input"_a, "hx"_a, "w_ih"_a, "w_hh"_a, "b_ih"_a = py::none(), "b_hh"_a = py::none(),
      "torch.lstm_cell: one LSTM step; hx is (h, c); returns (h', c').");
  m.def(
      "gru_cell",
      [](const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh,
         const std::optional<Tensor>& b_ih, const std::optional<Tensor>& b_hh) {
        return gru_cell(input, hx, w_ih, w_hh, tensor_or_undefined(b_ih), tensor_or_undefined(b_hh));
      },
      "input"_a, "hx"_a, "w_ih"_a, "w_hh"_a, "b_ih"_a = py::none(), "b_hh"_a = py::none(), "torch.gru_cell: one GRU step.");
  m.def(
      "rnn_tanh_cell",
      [](const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh,
         const std::optional<Tensor>& b_ih, const std::optional<Tensor>& b_hh) {
        return rnn_tanh_cell(input, hx, w_ih, w_hh, tensor_or_undefined(b_ih), tensor_or_undefined(b_hh));
      },
      "input"_a, "hx"_a, "w_ih"_a, "w_hh"_a, "b_ih"_a = py::none(), "b_hh"_a = py::none(),
      "torch.rnn_tanh_cell: h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh).");
  m.def(
      "rnn_relu_cell",
      [](const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh,
         const std::optional<Tensor>& b_ih, const std::optional<Tensor>& b_hh) {
        return rnn_relu_cell(input, hx, w_ih, w_hh, tensor_or_undefined(b_ih), tensor_or_undefined(b_hh));
      },
      "input"_a, "hx"_a, "w_ih"_a, "w_hh"_a, "b_ih"_a = py::none(), "b_hh"_a = py::none(),
      "torch.rnn_relu_cell: h' = relu(x W_ih^T + b_ih + h W_hh^T + b_hh).");

  py::class_<nn::RNNBase, nn::Module, std::shared_ptr<nn::RNNBase>>(m, "_RNNBase")
      .def(py::init<std::string, std::int64_t, std::int64_t, std::int64_t, bool>(), "mode"_a, "input_size"_a,
           "hidden_size"_a, "num_layers"_a = 1, "bias"_a = true);
}

}  // namespace kael::python
