"""kael.Size: torch.Size, the tuple that Tensor.shape and Tensor.size() return (a tuple of
ints with numel())."""
from __future__ import annotations

from . import _kael


class Size(tuple):
    def numel(self) -> int:
        n = 1
        for d in self:
            n *= d
        return n

    def __repr__(self) -> str:
        return f"kael.Size({list(self)})"

    def __getitem__(self, key):  # type: ignore[override]
        item = tuple.__getitem__(self, key)
        return Size(item) if isinstance(key, slice) else item


def _size_of(self: _kael.Tensor, dim: int | None = None):
    shape = _tensor_shape.__get__(self)
    if dim is None:
        return Size(shape)
    n = len(shape)
    if not -n <= dim < max(n, 1):
        raise _kael.IndexError(f"size: dim {dim} is out of range for a tensor of {n} dims")
    return shape[dim]


# Tensor.shape and Tensor.size() give a Size, as torch's.
_tensor_shape = _kael.Tensor.shape
_kael.Tensor.shape = property(lambda t: Size(_tensor_shape.__get__(t)), doc="The dims, a kael.Size.")
_kael.Tensor.size = _size_of
