"""Pickling (data-loader workers send tensors this way) keeps the values, the dtype (BF16
included), the shape and requires_grad. No kael.Tensor exists without a value: Tensor.__new__,
which a crafted pickle can reach with no state after it, makes an empty float32 tensor as
torch.Tensor.__new__ does, where it used to hand methods uninitialized memory."""
from __future__ import annotations

import copy
import copyreg
import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch

import kael


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "int32", "uint8", "bool"])
def test_pickle_round_trips_every_dtype(dtype):
    t = kael.tensor(np.arange(12).reshape(3, 4) % 5).to(getattr(kael, dtype))
    for back in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t)):
        assert back.dtype == t.dtype and back.shape == t.shape
        assert back.float().tolist() == t.float().tolist()


def test_pickle_keeps_requires_grad_and_copies():
    x = kael.tensor([[1.0, 2.0]], requires_grad=True)
    back = pickle.loads(pickle.dumps(x))
    assert back.requires_grad and back.is_leaf and back.tolist() == [[1.0, 2.0]]
    view = kael.tensor(np.arange(6).reshape(2, 3)).T  # a strided view pickles as its values
    assert pickle.loads(pickle.dumps(view)).tolist() == view.tolist()


def test_new_makes_an_empty_tensor_as_torch():
    for lib in (kael, torch):
        t = lib.Tensor.__new__(lib.Tensor)
        assert tuple(t.shape) == (0,) and t.dtype == lib.float32 and t.tolist() == []
    assert kael.Tensor().tolist() == []
    with pytest.raises(TypeError, match="no arguments"):
        kael.Tensor(3)


def crafted_pickle() -> bytes:
    """A pickle that calls copyreg.__newobj__(kael.Tensor) and nothing after it."""
    return (b"\x80\x02" + b"ccopyreg\n__newobj__\n" + b"ckael._kael\nTensor\n" + b"\x85R."  # TUPLE1, REDUCE, STOP
            )


def test_a_crafted_pickle_without_state_gives_a_whole_tensor():
    assert copyreg.__newobj__  # the route the pickle takes
    # in a child process: the old behaviour was a crash, not an exception
    code = ("import pickle, numpy as np, kael\n"
            f"t = pickle.loads({crafted_pickle()!r})\n"
            "assert t.shape == (0,) and t.numel() == 0, t.shape\n"
            "assert t.tolist() == [] and repr(t)\n"
            "assert np.asarray(t).shape == (0,) and len(memoryview(t)) == 0\n"
            "assert (t + 1).shape == (0,)\n"
            "print('ok')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", (result.returncode, result.stderr[-2000:])
