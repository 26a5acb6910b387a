"""kael.nn's RNN, LSTM and GRU, as torch.nn's (one direction, no projection): parameters
weight_ih_l<k>, weight_hh_l<k>, bias_ih_l<k>, bias_hh_l<k> initialized by kael::nn's C++ layer
(uniform in +-1/sqrt(hidden_size)), kept as attributes; the forward is kael's rnn() over the
whole sequence (each layer's input products in one GEMM, then a fused cell per step)."""
from __future__ import annotations

from typing import Any

from .. import _kael
from .._kael import Tensor
from .modules import Module, _check_device, _initialized


class RNNBase(Module):
    _mode = ""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        _check_device(device)
        name = type(self).__name__
        if bidirectional or proj_size:
            raise _kael.ValueError(f"{name}: bidirectional and proj_size are not supported")
        if not isinstance(dropout, (int, float)) or not 0 <= dropout <= 1:
            raise _kael.ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                                   "element being zeroed")
        self.mode, self.input_size, self.hidden_size, self.num_layers = mode, input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = False, 0
        native = _kael._RNNBase(mode, input_size, hidden_size, num_layers, bias)
        self._flat_weights_names = []
        for pname, tensor in native.named_parameters():
            setattr(self, pname, _initialized(tensor, dtype))
            self._flat_weights_names.append(pname)

    @property
    def _flat_weights(self) -> list[Tensor]:
        return [getattr(self, n) for n in self._flat_weights_names]

    def _run(self, input: Tensor, hx: Tensor | None, cx: Tensor | None) -> tuple[Tensor, Tensor, Tensor | None]:
        return _kael._rnn(self.mode, input, hx, cx, self._flat_weights, self.bias, self.num_layers, self.dropout,
                          self.training, self.batch_first)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:
        output, h_n, _ = self._run(input, hx, None)
        return output, h_n

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        if not self.bias:
            text += ", bias=False"
        if self.batch_first:
            text += ", batch_first=True"
        if self.dropout:
            text += f", dropout={self.dropout}"
        return text


class RNN(RNNBase):
    """h_t = tanh (or relu) of x_t W_ih^T + b_ih + h_(t-1) W_hh^T + b_hh, per layer."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device: Any = None, dtype: Any = None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise _kael.ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size, num_layers,
                         bias, batch_first, dropout, bidirectional, 0, device, dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """forward(input, (h_0, c_0)) -> output, (h_n, c_n); gates in torch's order i, f, g, o."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device, dtype)

    def forward(self, input: Tensor, hx: Any = None) -> Any:  # type: ignore[override]
        h0, c0 = (None, None) if hx is None else hx
        output, h_n, c_n = self._run(input, h0, c0)
        return output, (h_n, c_n)


class GRU(RNNBase):
    """forward(input, h_0) -> output, h_n; gates in torch's order r, z, n."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0,
                         device, dtype)
