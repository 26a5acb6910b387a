"""Grad mode, as PyTorch's: ``with kael.no_grad():`` (or ``@kael.no_grad()``) runs ops without
recording history; ``enable_grad`` turns recording back on inside it; ``set_grad_enabled(mode)``
sets it at once and, used with ``with``, restores the previous mode at the end. The mode belongs
to the calling thread."""
from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

from ._kael import _set_grad_enabled, is_grad_enabled

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled"]


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


class set_grad_enabled:
    """Sets grad mode when made; as a context manager, restores the previous mode on exit."""

    def __init__(self, mode: bool) -> None:
        self._previous = is_grad_enabled()
        _set_grad_enabled(bool(mode))

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: object) -> None:
        _set_grad_enabled(self._previous)
