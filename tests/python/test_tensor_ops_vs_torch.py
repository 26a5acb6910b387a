"""The ops a GPT-style script uses beyond the basic set, against PyTorch forward and backward
(test_tensor_vs_torch.py's bounds and layouts: contiguous, transposed, sliced and expanded
views), on shapes hypothesis draws: sin, cos, clamp, std, //, %, topk, gather, split, chunk,
unbind, repeat, roll, tril, triu, bmm, einsum, the losses, and the random ops' contracts."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes

import kael
from test_tensor_vs_torch import LAYOUTS, SETTINGS, Pair, check, close

SHAPES = array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=9)
SEEDS = st.integers(0, 2**32 - 1)

UNARY = {
    "sin": lambda lib, x: x.sin(),
    "cos": lambda lib, x: lib.cos(x),
    "clamp": lambda lib, x: x.clamp(-0.5, 0.7),
    "clamp_min": lambda lib, x: lib.clamp(x, min=0.1),
    "std": lambda lib, x: x.std(dim=-1, keepdim=True) if x.shape[-1] > 1 else x.std(),
    "std_all": lambda lib, x: x.std(correction=0),
    "remainder": lambda lib, x: x % 0.7,
    "tril": lambda lib, x: x.tril() if x.dim() >= 2 else x,
    "triu": lambda lib, x: lib.triu(x, 1) if x.dim() >= 2 else x,
    "tril_neg": lambda lib, x: x.tril(-1) if x.dim() >= 2 else x,
    "repeat": lambda lib, x: x.repeat(*([2] + [1] * (x.dim() - 1) + [3]) if x.dim() else (2,)),
    "roll": lambda lib, x: x.roll(2, -1),
    "roll_flat": lambda lib, x: lib.roll(x, -3),
    "roll_two": lambda lib, x: x.roll((1, -2), (0, -1)),
    "split": lambda lib, x: lib.cat([p * (i + 1) for i, p in enumerate(x.split(2, dim=-1))], -1),
    "split_sizes": lambda lib, x: lib.cat(list(x.split([1, x.shape[0] - 1], 0))[::-1], 0),
    "chunk": lambda lib, x: lib.cat([p * (i + 2) for i, p in enumerate(x.chunk(3, -1))], -1),
    "unbind": lambda lib, x: lib.stack([p * (i + 1) for i, p in enumerate(x.unbind(0))], -1),
    "topk": lambda lib, x: x.topk(min(3, x.shape[-1])).values,
    "topk_smallest": lambda lib, x: lib.topk(x, min(2, x.shape[0]), dim=0, largest=False)[0],
    "mT": lambda lib, x: x.mT if x.dim() >= 2 else x,
    "masked_fill": lambda lib, x: (x * 1).masked_fill_(x > 0.3, -2.0),
    "setitem": lambda lib, x: _setitem(x),
    "view_of_split": lambda lib, x: x.split(1, -1)[0].reshape(-1),
    "floor_divide_values": lambda lib, x: (x * 3).detach() // 1.5 + x,
}


def _setitem(x):
    y = x * 2
    y[..., 0] = 0.5
    y[0] = y[0] * 3
    return y


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("layout", LAYOUTS)
@SETTINGS
@given(shape=SHAPES, seed=SEEDS)
def test_ops_forward_and_backward(name, layout, shape, seed):
    if name.startswith("std") and layout == "expanded":
        pytest.skip("an expanded input repeats values: a deviation of 0 that float32 rounds differently")
    rng = np.random.default_rng(seed)
    pair = Pair(shape, rng, layout)
    check(UNARY[name], [pair], rng)


@SETTINGS
@given(b=st.integers(1, 4), n=st.integers(1, 17), m=st.integers(1, 19), p=st.integers(1, 13), seed=SEEDS,
       layout=st.sampled_from(["contiguous", "transposed"]))
def test_bmm_and_einsum(b, n, m, p, seed, layout):
    rng = np.random.default_rng(seed)
    a, c = Pair((b, n, m), rng, layout), Pair((b, m, p), rng)
    check(lambda lib, x, y: lib.bmm(x, y), [a, c], rng)
    check(lambda lib, x, y: lib.einsum("bij,bjk->bik", x, y), [a, c], rng)
    check(lambda lib, x, y: lib.einsum("bij,bjk->bki", x, y), [a, c], rng)
    check(lambda lib, x, y: lib.einsum("...ij,...jk", x, y), [a, c], rng)
    check(lambda lib, x, y: lib.einsum("bij,bjk->", x, y), [a, c], rng)
    check(lambda lib, x: lib.einsum("bij->j", x), [a], rng)
    check(lambda lib, x: lib.einsum("bij", x), [a], rng)


def test_einsum_of_three_operands_and_attention_forms():
    rng = np.random.default_rng(0)
    q, k, v = Pair((2, 3, 5, 4), rng), Pair((2, 3, 6, 4), rng), Pair((2, 3, 6, 4), rng)
    check(lambda lib, a, b: lib.einsum("bhqd,bhkd->bhqk", a, b), [q, k], rng)
    w = Pair((4, 7), rng)
    check(lambda lib, a, b, c: lib.einsum("bhqd,bhkd,de->bhqe", a, b, c), [q, k, w], rng)
    check(lambda lib, a, b: lib.einsum("i,j->ij", a, b), [Pair((5,), rng), Pair((3,), rng)], rng)
    with pytest.raises(kael.ValueError, match="diagonal"):
        kael.einsum("ii->i", kael.ones(3, 3))
    with pytest.raises(kael.ValueError, match="operands"):
        kael.einsum("ij,jk->ik", kael.ones(3, 3))


@SETTINGS
@given(shape=array_shapes(min_dims=2, max_dims=3, min_side=1, max_side=8), seed=SEEDS)
def test_gather(shape, seed):
    rng = np.random.default_rng(seed)
    pair = Pair(shape, rng, "transposed")
    index = rng.integers(0, shape[1], size=shape[:1] + (5,) + shape[2:])
    check(lambda lib, x: lib.gather(x, 1, lib.tensor(index)), [pair], rng)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("shape", [(9, 11), (4, 7, 3), (2, 5, 3, 2), (6,)])
def test_cross_entropy_reductions_smoothing_and_nd_form(reduction, smoothing, shape):
    rng = np.random.default_rng(1)
    logits = Pair(shape, rng, "contiguous")
    target_shape = shape[:1] + shape[2:] if len(shape) > 1 else ()
    target = rng.integers(0, shape[0] if len(shape) == 1 else shape[1], size=target_shape)
    if target.ndim:
        target.flat[0] = -1  # ignored

    def loss(lib, x):
        return lib.nn.functional.cross_entropy(x, lib.tensor(target), ignore_index=-1, reduction=reduction,
                                               label_smoothing=smoothing)
    check(loss, [logits], rng)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_and_mse_loss(reduction):
    rng = np.random.default_rng(2)
    x, y = Pair((7, 5), rng), Pair((7, 5), rng)
    target = rng.integers(0, 5, size=7)
    check(lambda lib, a: lib.nn.functional.nll_loss(a.log_softmax(-1), lib.tensor(target), reduction=reduction), [x], rng)
    check(lambda lib, a, b: lib.nn.functional.mse_loss(a, b, reduction=reduction), [x, y], rng)
    for lib in (kael, torch):
        assert lib.nn.functional.one_hot(lib.tensor([2, 0, 1]), 4).tolist() == [[0, 0, 1, 0], [1, 0, 0, 0], [0, 1, 0, 0]]


@pytest.mark.parametrize("bounds", [(0.0, 2.0), (0.0, None), (None, 2.0), (1.0, 1.0)])
def test_clamp_gradient_at_its_bounds_nan_and_infinities(bounds):
    # Where hypothesis's draws never land: an input exactly on a bound gets no gradient.
    values = [0.0, 1.0, 2.0, -1.0, 3.0, float("nan"), float("inf"), -float("inf")]
    grads = []
    for lib in (kael, torch):
        x = lib.tensor(values, requires_grad=True)
        lib.clamp(x, min=bounds[0], max=bounds[1]).backward(lib.tensor([0.5 * (i + 1) for i in range(len(values))]))
        grads.append(x.grad.tolist())
    assert grads[0] == grads[1]


@pytest.mark.parametrize("op", ["max", "min"])
def test_whole_tensor_max_and_min_share_a_tie_evenly(op):
    for values in ([3.0, 1.0, 3.0, -2.0, 3.0, -2.0], [1.0, float("nan"), 5.0, float("nan")], [4.0]):
        grads = []
        for lib in (kael, torch):
            x = lib.tensor(values, requires_grad=True)
            (getattr(x, op)() * 3.0).backward()
            grads.append(x.grad.tolist())
        assert grads[0] == grads[1], values


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nll_loss_of_log_softmax_on_wide_rows(dtype):
    """A language model's head: nll_loss's pick per row and log_softmax's row backward on rows
    wide enough to be split over threads, an ignored target among them; the input's gradient
    as torch's, and the same bits at 1 and 2 threads."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((300, 1003)).astype(dtype)
    target = rng.integers(0, 1003, 300)
    target[3] = -100
    before, grads = kael.get_num_threads(), []
    try:
        for threads in (1, 2):
            kael.set_num_threads(threads)
            k = kael.tensor(x, requires_grad=True)
            loss = kael.nn.functional.nll_loss(kael.nn.functional.log_softmax(k, dim=1), kael.tensor(target))
            loss.backward()
            grads.append(k.grad.numpy())
    finally:
        kael.set_num_threads(before)
    t = torch.tensor(x, requires_grad=True)
    t_loss = torch.nn.functional.nll_loss(torch.nn.functional.log_softmax(t, dim=1), torch.tensor(target))
    t_loss.backward()
    np.testing.assert_array_equal(grads[0], grads[1])
    np.testing.assert_allclose(loss.item(), t_loss.item(), rtol=1e-5)
    np.testing.assert_allclose(grads[0], t.grad.numpy(), rtol=1e-4, atol=1e-8)


def test_nll_loss_over_no_classes_is_an_index_error():
    with pytest.raises(IndexError, match="no classes"):
        kael.nn.functional.nll_loss(kael.zeros(3, 0), kael.tensor(np.array([-100, -100, -100])))


@pytest.mark.parametrize("width", [1, 15, 16, 37])
def test_log_softmax_rows_maximum_in_lanes(width):
    """log_softmax's row maximum, taken in 16 lanes, on ragged widths: the largest anywhere in a
    row (first, last, past the lanes), a NaN first or later, an infinity, as torch."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((6, width)).astype(np.float32)
    x[0, 0] = 30.0
    x[1, -1] = 30.0
    x[2, 0] = np.nan
    x[3, -1] = np.nan
    x[4, width // 2] = np.inf
    got = kael.nn.functional.log_softmax(kael.tensor(x), dim=1).numpy()
    want = torch.log_softmax(torch.tensor(x), dim=1).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("features", [(48, 7), (20, 7)])
def test_linear_weight_gradient_in_the_weights_layout(features):
    """linear's weight gradient, taken in the weight's own (out, in) layout where the product
    reads the output gradient transposed in place (in a multiple of 16), else as a^T g: torch's
    values, and the same bits at 1 and 2 threads."""
    fan_in, fan_out = features
    rng = np.random.default_rng(6)
    x = rng.standard_normal((33, fan_in)).astype(np.float32)
    w = rng.standard_normal((fan_out, fan_in)).astype(np.float32)
    before, grads = kael.get_num_threads(), []
    try:
        for threads in (1, 2):
            kael.set_num_threads(threads)
            kw = kael.tensor(w, requires_grad=True)
            (kael.nn.functional.linear(kael.tensor(x), kw) ** 2).sum().backward()
            grads.append(kw.grad.numpy())
    finally:
        kael.set_num_threads(before)
    tw = torch.tensor(w, requires_grad=True)
    (torch.nn.functional.linear(torch.tensor(x), tw) ** 2).sum().backward()
    np.testing.assert_array_equal(grads[0], grads[1])
    np.testing.assert_allclose(grads[0], tw.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_integer_floor_division_and_remainder_are_pythons():
    a = np.array([-7, -6, -1, 0, 1, 5, 7])
    for b in (3, -3):
        k = kael.tensor(a)
        t = torch.tensor(a)
        assert (k // b).tolist() == (t // b).tolist() == (a // b).tolist()
        assert (k % b).tolist() == (t % b).tolist() == (a % b).tolist()
    assert (7 // kael.tensor([2, -2])).tolist() == [3, -4]
    with pytest.raises(kael.ValueError, match="division by zero"):
        kael.tensor([1, 2]) // 0
    for lib, error in ((kael, kael.ValueError), (torch, RuntimeError)):  # no derivative, in either
        x = lib.ones(2, requires_grad=True)
        with pytest.raises(error, match="floor_divide"):
            (x // 0.5).sum().backward()


def test_topk_values_and_indices_match_torch_with_ties_and_nan():
    x = np.array([[1.0, 3.0, 3.0, -1.0, 2.0], [0.5, float("nan"), 0.2, 0.2, 9.0]], dtype=np.float32)
    for largest in (True, False):
        k = kael.topk(kael.tensor(x), 3, largest=largest)
        t = torch.topk(torch.tensor(x), 3, largest=largest)
        np.testing.assert_array_equal(k.values.numpy(), t.values.numpy())
        np.testing.assert_array_equal(k.indices.numpy(), t.indices.numpy())


def test_multinomial_and_randperm_contracts():
    kael.manual_seed(0)
    probs = kael.tensor([[0.0, 0.2, 0.8], [0.5, 0.5, 0.0]])
    draws = kael.multinomial(probs, 2000, replacement=True)
    assert draws.shape == (2, 2000) and draws.dtype == kael.int64
    counts = np.bincount(draws[0].numpy(), minlength=3)
    assert counts[0] == 0 and abs(counts[2] / 2000 - 0.8) < 0.05
    assert 2 not in draws[1].tolist()
    once = kael.multinomial(kael.tensor([1.0, 2.0, 3.0, 4.0]), 4)
    assert sorted(once.tolist()) == [0, 1, 2, 3]
    with pytest.raises(kael.ValueError):
        kael.multinomial(kael.tensor([1.0, 0.0]), 2)
    with pytest.raises(kael.ValueError):
        kael.multinomial(kael.tensor([1.0, -1.0]), 1)
    perm = kael.randperm(50)
    assert sorted(perm.tolist()) == list(range(50)) and perm.tolist() != list(range(50))
    kael.manual_seed(5)
    first = kael.randperm(10).tolist()
    kael.manual_seed(5)
    assert kael.randperm(10).tolist() == first


def test_in_place_random_fills_and_new_constructors():
    t = kael.empty(1000)
    t.normal_(2.0, 0.5)
    assert abs(float(t.mean()) - 2.0) < 0.1 and abs(float(t.std()) - 0.5) < 0.1
    t.uniform_(-1, 1)
    assert float(t.min()) >= -1 and float(t.max()) < 1
    z = t.new_zeros(2, 3)
    assert z.shape == (2, 3) and z.dtype == t.dtype and float(z.abs().sum()) == 0
    assert t.new_ones((2,), dtype=kael.int64).tolist() == [1, 1]
    assert kael.ones(2, dtype=kael.int64).type_as(t).dtype == kael.float32
    assert f"{kael.tensor(2.5):.2f}" == "2.50" and f"{kael.tensor(3)}" == "3"


def test_softmax_over_an_empty_dim_as_torch():
    for shape, dim in (((0, 4), 0), ((3, 0), -1)):
        k = kael.softmax(kael.zeros(*shape), dim)
        t = torch.softmax(torch.zeros(*shape), dim)
        assert k.shape == tuple(t.shape)
        assert kael.log_softmax(kael.zeros(*shape), dim).shape == tuple(t.shape)


def causal_probabilities(q, k):
    """torch's softmax(q k^T / sqrt(E)) with position s hidden from row t < s."""
    L, E = q.shape[-2], q.shape[-1]
    hidden = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
    return torch.softmax((q @ k.transpose(-1, -2) / np.sqrt(E)).masked_fill(hidden, float("-inf")), -1)


def test_scaled_dot_product_attention_dropout_drops_the_probabilities():
    """Causal F32 attention with dropout runs on the training kernels, whose mask torch cannot draw
    bit for bit: with v the identity the output is the dropped weights themselves, so the test reads
    the mask off it (about 1 - p kept, each probability / (1 - p), nothing above the diagonal), checks
    that manual_seed reproduces it, and holds the forward and every gradient of a second call under
    the same seed (the same mask) to torch's through that mask."""
    rng = np.random.default_rng(3)
    B, H, L, p = 2, 3, 37, 0.3  # E = L: v may be the identity
    F = kael.nn.functional
    q_np, k_np = (rng.standard_normal((B, H, L, L)).astype(np.float32) * 0.4 for _ in range(2))
    eye = np.broadcast_to(np.eye(L, dtype=np.float32), (B, H, L, L)).copy()

    def weights(seed):
        kael.manual_seed(seed)
        return F.scaled_dot_product_attention(kael.tensor(q_np), kael.tensor(k_np), kael.tensor(eye), dropout_p=p,
                                              is_causal=True).numpy()
    dropped = weights(7)
    probs = causal_probabilities(torch.tensor(q_np, dtype=torch.float64), torch.tensor(k_np, dtype=torch.float64))
    probs = probs.numpy()
    kept, lower = dropped != 0, np.tril(np.ones((L, L), dtype=bool))
    assert not kept[..., ~lower].any()
    assert abs(kept[..., lower].mean() - (1 - p)) < 0.03  # 4218 draws: 4 standard deviations
    np.testing.assert_allclose(dropped[kept], probs[kept] / (1 - p), rtol=1e-5)
    assert (weights(7) == dropped).all()
    assert (weights(8) != dropped).any()

    v_np = rng.standard_normal((B, H, L, L)).astype(np.float32)
    q, k, v = (kael.tensor(x, requires_grad=True) for x in (q_np, k_np, v_np))
    kael.manual_seed(7)
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
    g = rng.standard_normal(out.shape).astype(np.float32)
    (out * kael.tensor(g)).sum().backward()
    tq, tk, tv = (torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in (q_np, k_np, v_np))
    want = (causal_probabilities(tq, tk) * torch.tensor(kept / (1 - p))) @ tv
    close(out.detach().numpy(), want.detach().numpy(), rtol=1e-5)
    (want * torch.tensor(g, dtype=torch.float64)).sum().backward()
    for got, leaf in ((q, tq), (k, tk), (v, tv)):
        expected = leaf.grad.numpy()
        np.testing.assert_allclose(got.grad.numpy(), expected, rtol=0, atol=1e-5 * np.abs(expected).max())


def test_scaled_dot_product_attention_dropout_elsewhere_is_dropout_of_the_probabilities():
    """Outside the kernel form (here a scale of its own) dropout is F.dropout of the probabilities,
    drawing from the same generator in the same order."""
    rng = np.random.default_rng(3)
    q, k, v = (kael.tensor(rng.standard_normal((2, 4, 5)).astype(np.float32), requires_grad=True) for _ in range(3))
    F = kael.nn.functional
    kael.manual_seed(7)
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.3, is_causal=True, scale=0.25)
    kael.manual_seed(7)
    probs = F.softmax((q @ k.transpose(-1, -2)) * 0.25 + kael.triu(kael.full((4, 4), float("-inf")), 1), -1)
    want = F.dropout(probs, 0.3) @ v
    close(out.detach().numpy(), want.detach().numpy())
    out.sum().backward()
    assert q.grad is not None and k.grad is not None and v.grad is not None
