"""kael.nn's convolution, pooling and reshaping layers, as torch.nn's: Conv1d, Conv2d, MaxPool1d,
MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, Flatten, Dropout1d, Dropout2d. The convolutions take
their initialized parameters from kael::nn's C++ layers (torch's rule: uniform in
+-1/sqrt(in / groups * kernel)) and keep them as attributes; every forward is the functional op."""
from __future__ import annotations

from typing import Any

from .. import _kael
from .._kael import Tensor
from .modules import Module, _check_device, _initialized


def _tuple(value: Any, n: int) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * n


class _ConvNd(Module):
    _dims = 2
    _native_type: Any = None
    _function: Any = None

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        _check_device(device)
        name = type(self).__name__
        if padding_mode != "zeros":
            raise _kael.ValueError(f"{name}: padding_mode '{padding_mode}' is not supported (only 'zeros')")
        n = self._dims
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride, self.dilation = _tuple(kernel_size, n), _tuple(stride, n), _tuple(dilation, n)
        self.padding = padding if isinstance(padding, str) else _tuple(padding, n)
        self.padding_mode = padding_mode
        native = type(self)._native_type(in_channels, out_channels, self.kernel_size, groups, bias)
        self.weight = _initialized(native.weight, dtype)
        self.bias = _initialized(native.bias, dtype) if bias else None

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._function(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                                    self.groups)

    def extra_repr(self) -> str:
        text = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * self._dims:
            text += f", padding={self.padding!r}" if isinstance(self.padding, str) else f", padding={self.padding}"
        if self.dilation != (1,) * self._dims:
            text += f", dilation={self.dilation}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        return text


class Conv2d(_ConvNd):
    """(N, in, H, W) -> (N, out, Ho, Wo); weight (out, in / groups, kH, kW), bias (out)."""

    _dims = 2
    _native_type = _kael._Conv2d
    _function = staticmethod(_kael.conv2d)


class Conv1d(_ConvNd):
    """(N, in, L) -> (N, out, Lo); weight (out, in / groups, k), bias (out)."""

    _dims = 1
    _native_type = _kael._Conv1d
    _function = staticmethod(_kael.conv1d)


class _MaxPoolNd(Module):
    _function: Any = None

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input: Tensor) -> Any:
        return type(self)._function(input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                                    self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool2d(_MaxPoolNd):
    _function = staticmethod(_kael.max_pool2d)


class MaxPool1d(_MaxPoolNd):
    _function = staticmethod(_kael.max_pool1d)


class AvgPool2d(Module):
    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override: int | None = None) -> None:
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input: Tensor) -> Tensor:
        return _kael.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                                self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    def __init__(self, output_size: Any) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return _kael.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class Flatten(Module):
    """Dims start_dim..end_dim merged into one (batch dim kept by default)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input: Tensor) -> Tensor:
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class _DropoutNd(Module):
    _function: Any = None

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise _kael.ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._function(input, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout2d(_DropoutNd):
    """Whole channels of (N, C, H, W) zeroed with probability p while training."""

    _function = staticmethod(_kael.dropout2d)


class Dropout1d(_DropoutNd):
    """Whole channels of (N, C, L) zeroed with probability p while training."""

    _function = staticmethod(_kael.dropout1d)
