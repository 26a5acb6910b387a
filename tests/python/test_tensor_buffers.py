"""NumPy and the buffer protocol share a tensor's memory, and a write through them is invisible
to autograd's version counter. So, as torch refuses numpy() on a tensor that requires grad,
kael refuses every way in (numpy(), numpy.asarray, __array__, memoryview) for such a tensor,
and a gradient can never silently use a value written behind autograd's back."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import kael

WAYS_IN = {
    "numpy": lambda t: t.numpy(),
    "asarray": np.asarray,
    "array": np.array,
    "__array__": lambda t: t.__array__(),
    "memoryview": memoryview,
}


@pytest.mark.parametrize("way", WAYS_IN)
def test_a_tensor_that_requires_grad_shares_no_memory(way):
    x = kael.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises((TypeError, BufferError), match="requires grad"):
        WAYS_IN[way](x)
    if way in ("numpy", "asarray", "array", "__array__"):  # torch has no buffer protocol
        with pytest.raises(RuntimeError, match="requires grad"):
            WAYS_IN[way](torch.tensor([1.0, 2.0, 3.0], requires_grad=True))


def test_the_gradient_is_never_computed_from_a_write_behind_autograd():
    x = kael.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * x
    with pytest.raises((TypeError, BufferError)):
        np.asarray(x)[0] = 5.0
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0, 6.0])


@pytest.mark.parametrize("way", WAYS_IN)
def test_detached_and_plain_tensors_still_share_memory(way):
    x = kael.tensor([1.0, 2.0, 3.0], requires_grad=True)
    view = WAYS_IN[way](x.detach())
    assert np.asarray(view).tolist() == [1.0, 2.0, 3.0]
    plain = kael.zeros(3)
    np.asarray(plain)[1] = 7.0  # a tensor without grad shares its memory both ways, as before
    assert plain.tolist() == [0.0, 7.0, 0.0]
    with kael.no_grad():  # the rule holds whatever the grad mode, as torch's
        with pytest.raises((TypeError, BufferError)):
            np.asarray(x)
