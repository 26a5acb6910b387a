// RNN, LSTM and GRU (nn/rnn.hpp).
#include "kael/nn/rnn.hpp"

#include <cmath>

#include "kael/core/error.hpp"
#include "nn/uniform.hpp"

namespace kael::nn {

RNNBase::RNNBase(std::string m, std::int64_t in, std::int64_t hidden, std::int64_t layers, bool with_bias,
                 bool first, double p)
    : mode(std::move(m)), input_size(in), hidden_size(hidden), num_layers(layers), bias(with_bias),
      batch_first(first), dropout(p) {
  if (in <= 0 || hidden <= 0) throw ValueError(str(name(), ": input_size and hidden_size must be positive"));
  if (layers <= 0) throw ValueError(str(name(), ": num_layers must be greater than or equal to 1"));
  if (!(p >= 0.0 && p <= 1.0)) throw ValueError(str(name(), ": dropout should be a number in range [0, 1]"));
  const std::int64_t gates = mode == "LSTM" ? 4 : mode == "GRU" ? 3 : 1;
  if (gates == 1 && mode != "RNN_TANH" && mode != "RNN_RELU")
    throw ValueError(str("RNNBase: unknown mode '", mode, "'"));
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden));
  for (std::int64_t l = 0; l < layers; ++l) {
    const std::string k = std::to_string(l);
    weights_.push_back(register_parameter("weight_ih_l" + k, detail::uniform({gates * hidden, l == 0 ? in : hidden}, bound)));
    weights_.push_back(register_parameter("weight_hh_l" + k, detail::uniform({gates * hidden, hidden}, bound)));
    if (with_bias) {
      weights_.push_back(register_parameter("bias_ih_l" + k, detail::uniform({gates * hidden}, bound)));
      weights_.push_back(register_parameter("bias_hh_l" + k, detail::uniform({gates * hidden}, bound)));
    }
  }
}

std::string RNNBase::name() const { return mode == "LSTM" ? "LSTM" : mode == "GRU" ? "GRU" : "RNN"; }

Tensor RNNBase::forward(const Tensor& input) { return forward_state(input).output; }

RnnResult RNNBase::forward_state(const Tensor& input, const Tensor& hx, const Tensor& cx) {
  return rnn(mode, input, hx, cx, weights_, bias, num_layers, dropout, is_training(), batch_first);
}

RNN::RNN(std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers, const std::string& nonlinearity,
         bool bias, bool batch_first, double dropout)
    : RNNBase(nonlinearity == "relu" ? "RNN_RELU" : "RNN_TANH", input_size, hidden_size, num_layers, bias, batch_first,
              dropout) {
  if (nonlinearity != "tanh" && nonlinearity != "relu")
    throw ValueError(str("RNN: unknown nonlinearity '", nonlinearity, "'. Select from 'tanh' or 'relu'."));
}

}  // namespace kael::nn
