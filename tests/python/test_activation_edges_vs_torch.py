"""relu and dropout against torch on the values where a composed rule and torch's part ways:
NaN, -0.0, infinities, a gradient of inf at a zero output, p at its ends, integer inputs."""
import math

import numpy as np
import pytest
import torch

import kael
import kael.nn.functional as F

SPECIAL = [math.nan, -0.0, 0.0, -1.5, 2.0, math.inf, -math.inf]
GRADS = [1.0, math.inf, math.inf, math.nan, 3.0, -2.0, math.nan]


def same_bits(got, want):
    """Equal values, NaN where NaN, and the same sign of zero."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape
    for a, b in zip(got.ravel(), want.ravel()):
        assert (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b)), (got, want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_relu_forward_and_backward_on_special_values(dtype):
    x = kael.tensor(SPECIAL, dtype=dtype, requires_grad=True)
    tx = torch.tensor(SPECIAL, dtype=getattr(torch, dtype), requires_grad=True)
    y, ty = kael.relu(x), torch.relu(tx)
    same_bits(y.tolist(), ty.tolist())
    y.backward(kael.tensor(GRADS, dtype=dtype))
    ty.backward(torch.tensor(GRADS, dtype=getattr(torch, dtype)))
    same_bits(x.grad.tolist(), tx.grad.tolist())


def test_relu_of_integers_is_exact():
    values = [-3, 0, 5, -(2**40), 2**40]
    assert kael.relu(kael.tensor(values)).tolist() == torch.relu(torch.tensor(values)).tolist()


@pytest.mark.parametrize("p", [0.1, 0.25, 0.3, 0.5, 0.77])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_dropout_scale_and_gradient_match_torchs_noise(p, dtype):
    # On ones the output is torch's noise tensor: 0 or 1/(1-p) rounded to the dtype.
    scale = torch.nn.functional.dropout(torch.ones(4096, dtype=getattr(torch, dtype)), p).max().item()
    x = kael.ones(4096, dtype=dtype, requires_grad=True)
    y = F.dropout(x, p)
    assert set(y.tolist()) <= {0.0, scale}
    kept = np.asarray(y.tolist()) != 0
    assert abs(kept.mean() - (1 - p)) < 0.05
    g = np.random.default_rng(0).standard_normal(4096).astype(dtype)
    y.backward(kael.from_numpy(g))
    want = torch.from_numpy(g) * torch.from_numpy(np.where(kept, scale, 0.0).astype(dtype))
    same_bits(x.grad.tolist(), want.tolist())


def test_dropout_keeps_nan_where_dropped_as_torch():
    x = kael.full((256,), math.nan, requires_grad=True)
    y = F.dropout(x, 0.5)
    assert all(math.isnan(v) for v in y.tolist())  # NaN * 0 in torch too
    y.backward(kael.full((256,), math.nan))
    assert all(math.isnan(v) for v in x.grad.tolist())
    same_bits(F.dropout(kael.tensor([math.nan, 1.0]), 1.0).tolist(),
              torch.nn.functional.dropout(torch.tensor([math.nan, 1.0]), 1.0).tolist())


def test_dropout_at_the_ends_and_outside_training():
    x = kael.tensor([1.0, -2.0, 3.0], requires_grad=True)
    assert F.dropout(x, 0.0).tolist() == [1.0, -2.0, 3.0]
    assert F.dropout(x, 0.9, False).tolist() == [1.0, -2.0, 3.0]
    y = F.dropout(x, 1.0)
    assert y.tolist() == [0.0, -0.0, 0.0] == torch.nn.functional.dropout(torch.tensor([1.0, -2.0, 3.0]), 1.0).tolist()
    y.backward(kael.ones(3))
    assert x.grad.tolist() == [0.0, 0.0, 0.0]


def test_dropout_refuses_to_scale_integers_as_torch():
    ints = kael.tensor([1, 2, 3])
    assert F.dropout(ints, 0.5, False).tolist() == [1, 2, 3]
    with pytest.raises(RuntimeError):
        torch.nn.functional.dropout(torch.tensor([1, 2, 3]), 0.5)
    with pytest.raises(kael.TypeError):
        F.dropout(ints, 0.5)


def test_dropout_mask_is_reproducible_independent_and_the_same_on_any_thread_count():
    """The mask is drawn from a seed that manual_seed fixes, element by element on the pool's
    threads: the same bits at 1 and 2 threads, a fresh mask each call (two calls' drops overlap
    as independent ones would, p^2), and the fraction dropped near p on a large tensor."""
    x = kael.ones(600, 700)
    masks = {}
    try:
        for threads in (1, 2):
            kael.set_num_threads(threads)
            kael.manual_seed(11)
            masks[threads] = (F.dropout(x, 0.3).numpy() == 0, F.dropout(x, 0.3).numpy() == 0)
    finally:
        kael.set_num_threads(0)
    assert all(np.array_equal(a, b) for a, b in zip(masks[1], masks[2]))
    first, second = masks[1]
    assert abs(first.mean() - 0.3) < 0.005 and abs(second.mean() - 0.3) < 0.005
    assert abs((first & second).mean() - 0.09) < 0.005
