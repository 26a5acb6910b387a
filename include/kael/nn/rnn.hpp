// The recurrent layers of kael::nn, as torch.nn.RNN / LSTM / GRU (one direction): per layer k
// the parameters weight_ih_l<k> (G H, in), weight_hh_l<k> (G H, H), bias_ih_l<k> and
// bias_hh_l<k> (G H), all uniform in +-1/sqrt(H) as torch's, G = 4 (LSTM), 3 (GRU), 1 (RNN).
// forward_state runs tensor/rnn.hpp's rnn().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kael/nn/module.hpp"
#include "kael/tensor/rnn.hpp"

namespace kael::nn {

class RNNBase : public Module {
 public:
  // mode as rnn() takes it: "RNN_TANH", "RNN_RELU", "LSTM", "GRU".
  RNNBase(std::string mode, std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers = 1,
          bool bias = true, bool batch_first = false, double dropout = 0.0);
  // The outputs of the last layer (Module's single-input forward); forward_state also gives
  // the final states and takes initial ones (undefined: zeros).
  Tensor forward(const Tensor& input) override;
  RnnResult forward_state(const Tensor& input, const Tensor& hx = Tensor(), const Tensor& cx = Tensor());
  std::string name() const override;
  // The parameters in rnn()'s order (layer after layer: w_ih, w_hh, b_ih, b_hh).
  std::vector<Tensor> flat_weights() const { return weights_; }

  std::string mode;
  std::int64_t input_size, hidden_size, num_layers;
  bool bias, batch_first;
  double dropout;

 private:
  std::vector<Tensor> weights_;
};

// nonlinearity "tanh" or "relu".
class RNN : public RNNBase {
 public:
  RNN(std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers = 1,
      const std::string& nonlinearity = "tanh", bool bias = true, bool batch_first = false, double dropout = 0.0);
};

class LSTM : public RNNBase {
 public:
  LSTM(std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers = 1, bool bias = true,
       bool batch_first = false, double dropout = 0.0)
      : RNNBase("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout) {}
};

class GRU : public RNNBase {
 public:
  GRU(std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers = 1, bool bias = true,
      bool batch_first = false, double dropout = 0.0)
      : RNNBase("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout) {}
};

}  // namespace kael::nn
