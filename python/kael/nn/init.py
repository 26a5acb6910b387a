"""kael.nn.init: torch.nn.init's initializers. Each fills its tensor in place without
recording history (as torch's, under no_grad) and returns it; the random ones draw from the
generator kael.manual_seed seeds."""
from __future__ import annotations

import math

from .. import _kael
from .._kael import Tensor
from ..autograd import no_grad

__all__ = ["calculate_gain", "constant_", "ones_", "zeros_", "normal_", "uniform_", "trunc_normal_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_"]


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The gain torch recommends for a nonlinearity (tanh 5/3, relu sqrt(2), ...)."""
    if nonlinearity in ("linear", "conv1d", "conv2d", "conv3d", "sigmoid", "identity"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise _kael.ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _fans(tensor: Tensor) -> tuple[int, int]:
    if tensor.dim() < 2:
        raise _kael.ValueError("fan in and fan out can not be computed for a tensor with fewer than 2 dimensions")
    receptive = 1
    for size in tensor.shape[2:]:
        receptive *= size
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def constant_(tensor: Tensor, val: float) -> Tensor:
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 0.0)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: object = None) -> Tensor:
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: object = None) -> Tensor:
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0) -> Tensor:
    """Normal (mean, std) draws, redrawn until inside [a, b]."""
    with no_grad():
        tensor.normal_(mean, std)
        for _ in range(100):
            outside = ((tensor < a).long() + (tensor > b).long()) > 0
            if not bool(outside.sum() > 0):
                return tensor
            redraw = tensor.new_empty(*tensor.shape).normal_(mean, std)
            tensor.copy_(_kael.where(outside, redraw, tensor))
        return tensor.clamp_(a, b)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    fan_in, fan_out = _fans(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound)


def xavier_normal_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    fan_in, fan_out = _fans(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str) -> float:
    if mode not in ("fan_in", "fan_out"):
        raise _kael.ValueError(f"mode {mode!r} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _fans(tensor)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan_in if mode == "fan_in" else fan_out)


def kaiming_uniform_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu") -> Tensor:
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu") -> Tensor:
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity))
