"""Rules kael keeps as torch does, each checked against torch itself: embedding and index_select
refuse ids outside [0, size) (negative ones too) where t[ids] counts them from the end, only
floating tensors require or hold a gradient, and an assigned .grad has the tensor's dtype and
shape."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import kael

WEIGHT = np.arange(12, dtype=np.float32).reshape(4, 3)


def lookups(lib):
    w = lib.tensor(WEIGHT)
    return {
        "embedding": lambda ids: lib.nn.functional.embedding(lib.tensor(ids), w),
        "index_select": lambda ids: lib.index_select(w, 0, lib.tensor(ids)),
    }


@pytest.mark.parametrize("op", ["embedding", "index_select"])
@pytest.mark.parametrize("ids", [[-1], [0, -4], [4], [1, 9]])
def test_lookups_refuse_ids_outside_the_rows(op, ids):
    with pytest.raises(IndexError):
        lookups(torch)[op](ids)
    with pytest.raises(IndexError, match=r"out of range \[0, 4\)"):
        lookups(kael)[op](ids)


@pytest.mark.parametrize("op", ["embedding", "index_select"])
def test_lookups_of_ids_inside_the_rows_equal_torchs(op):
    ids = [3, 0, 0, 2]
    np.testing.assert_array_equal(lookups(kael)[op](ids).numpy(), lookups(torch)[op](ids).numpy())


@pytest.mark.parametrize("ids", [[-1], [0, -4, 2]])
def test_a_subscript_counts_negative_ids_from_the_end(ids):
    np.testing.assert_array_equal(kael.tensor(WEIGHT)[ids].numpy(), torch.tensor(WEIGHT)[ids].numpy())
    with pytest.raises(IndexError):
        kael.tensor(WEIGHT)[[-5]]


def test_an_integer_tensor_neither_requires_nor_holds_a_gradient():
    with pytest.raises(RuntimeError, match="floating point"):
        torch.zeros(3, dtype=torch.int64).requires_grad_()
    ids = kael.zeros(3, dtype=kael.int64)
    with pytest.raises(TypeError, match="floating"):
        ids.requires_grad_()
    with pytest.raises(TypeError, match="floating"):
        kael.zeros(3, dtype=kael.int64, requires_grad=True)
    # torch lets an integer tensor hold a gradient of its own dtype; kael's gradients are
    # floating only, as requires_grad is
    with pytest.raises(TypeError, match="only floating tensors can hold a gradient"):
        ids.grad = kael.zeros(3, dtype=kael.int64)
    assert ids.grad is None


@pytest.mark.parametrize("wrong", ["dtype", "float64", "shape"])
def test_an_assigned_gradient_has_the_tensors_dtype_and_shape(wrong):
    make = {"dtype": lambda lib: lib.zeros(3, dtype=lib.int64), "float64": lambda lib: lib.zeros(3, dtype=lib.float64),
            "shape": lambda lib: lib.zeros(4)}[wrong]
    t = torch.zeros(3)
    with pytest.raises(RuntimeError, match="dtype" if wrong != "shape" else "size"):
        t.grad = make(torch)
    x = kael.zeros(3)
    with pytest.raises(TypeError if wrong != "shape" else ValueError, match="dtype" if wrong != "shape" else "shape"):
        x.grad = make(kael)
    assert x.grad is None
    x.grad = kael.ones(3)  # the right dtype and shape
    assert x.grad.tolist() == [1.0, 1.0, 1.0]
    x.grad = None
    assert x.grad is None
