"""Grad mode, as PyTorch's: ``with kael.no_grad():`` (or ``@kael.no_grad()``) runs ops without
recording history; ``enable_grad`` turns recording back on inside it; ``set_grad_enabled(mode)``
sets it at once and, used with ``with``, restores the previous mode at the end. The mode belongs
to the calling thread."""
from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

from ._kael import Tensor, _autograd_grad, _set_grad_enabled, is_grad_enabled

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode", "grad"]


class _GradMode:
    """A context manager and decorator that runs its body with grad mode `_enabled`."""

    _enabled: bool

    def __init__(self) -> None:
        self._previous: list[bool] = []

    def __enter__(self) -> None:
        self._previous.append(is_grad_enabled())
        _set_grad_enabled(self._enabled)

    def __exit__(self, *exc: object) -> None:
        _set_grad_enabled(self._previous.pop())

    def __call__(self, function: F) -> F:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with type(self)():
                return function(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


class no_grad(_GradMode):
    _enabled = False


class enable_grad(_GradMode):
    _enabled = True


class inference_mode(_GradMode):
    """torch.inference_mode: no history recorded in its body (kael's no_grad; mode=False turns
    recording back on, as enable_grad)."""

    def __init__(self, mode: bool = True) -> None:
        super().__init__()
        self._enabled = not mode

    def __call__(self, function: F) -> F:
        mode = not self._enabled

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with inference_mode(mode):
                return function(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


def grad(outputs: Any, inputs: Any, grad_outputs: Any = None, retain_graph: bool | None = None,
         create_graph: bool = False, only_inputs: bool = True, allow_unused: bool | None = None,
         is_grads_batched: bool = False, materialize_grads: bool = False) -> tuple[Any, ...]:
    """torch.autograd.grad: the gradients of outputs with respect to inputs, returned (no .grad
    changes). An input the outputs do not use gives None with allow_unused (zeros with
    materialize_grads), else an error. create_graph (higher derivatives) is not supported."""
    if create_graph or is_grads_batched:
        raise NotImplementedError("kael.autograd.grad: create_graph and is_grads_batched are not supported")
    outs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    ins = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    if grad_outputs is None:
        seeds = [None] * len(outs)
    else:
        seeds = [grad_outputs] if isinstance(grad_outputs, Tensor) else list(grad_outputs)
    unused_ok = bool(allow_unused) or materialize_grads
    result = _autograd_grad(outs, ins, seeds, bool(retain_graph), unused_ok)
    if materialize_grads:
        from ._kael import zeros_like
        result = tuple(zeros_like(x) if g is None else g for g, x in zip(result, ins))
    return tuple(result)


class set_grad_enabled:
    """Sets grad mode when made; as a context manager, restores the previous mode on exit."""

    def __init__(self, mode: bool) -> None:
        self._previous = is_grad_enabled()
        _set_grad_enabled(bool(mode))

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: object) -> None:
        _set_grad_enabled(self._previous)
