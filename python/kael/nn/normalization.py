"""kael.nn's BatchNorm1d, BatchNorm2d and GroupNorm, as torch.nn's: the same parameters
(weight ones, bias zeros), buffers (running_mean, running_var, num_batches_tracked) and
train / eval behaviour; the forward is kael.nn.functional's batch_norm / group_norm."""
from __future__ import annotations

from typing import Any

from .. import _kael
from .._kael import Tensor
from .modules import Module, Parameter, _check_device


def _affine(n: int, dtype: Any) -> tuple[Tensor, Tensor]:
    weight, bias = _kael.ones(n), _kael.zeros(n)
    if dtype is not None:
        weight, bias = weight.to(dtype), bias.to(dtype)
    return Parameter(weight), Parameter(bias)


class _BatchNorm(Module):
    _input_dims: tuple[int, ...] = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        _check_device(device)
        if num_features <= 0:
            raise _kael.ValueError(f"{type(self).__name__}: num_features must be positive, got {num_features}")
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight, self.bias = _affine(num_features, dtype)
        else:
            self.weight = self.bias = None
        if track_running_stats:
            mean, var = _kael.zeros(num_features), _kael.ones(num_features)
            if dtype is not None:
                mean, var = mean.to(dtype), var.to(dtype)
            self.register_buffer("running_mean", mean)
            self.register_buffer("running_var", var)
            self.register_buffer("num_batches_tracked", _kael.zeros((), dtype=_kael.int64))
        else:
            self.running_mean = self.running_var = self.num_batches_tracked = None

    def forward(self, input: Tensor) -> Tensor:
        if input.dim() not in self._input_dims:
            dims = " or ".join(f"{d}D" for d in self._input_dims)
            raise _kael.ValueError(f"expected {dims} input (got {input.dim()}D input)")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            from ..autograd import no_grad
            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a cumulative average
                factor = 1.0 / float(self.num_batches_tracked.item())
        batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        keep_running = not self.training or self.track_running_stats
        return _kael.batch_norm(input, self.running_mean if keep_running else None,
                                self.running_var if keep_running else None, self.weight, self.bias, batch_stats,
                                factor, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Over (N, C) or (N, C, L): statistics per channel."""

    _input_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Over (N, C, H, W): statistics per channel."""

    _input_dims = (4,)


class GroupNorm(Module):
    """Channels split into num_groups groups, each normalized per sample."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        _check_device(device)
        if num_groups <= 0 or num_channels % num_groups != 0:
            raise _kael.ValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        if affine:
            self.weight, self.bias = _affine(num_channels, dtype)
        else:
            self.weight = self.bias = None

    def forward(self, input: Tensor) -> Tensor:
        return _kael.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"
