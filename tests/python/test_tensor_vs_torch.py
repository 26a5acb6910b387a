"""kael's tensor library against PyTorch, op by op: F32 forward values within 1e-6 relative of
torch's (relative to the largest output, or to the same op on |inputs| where a sum cancels;
integer and bool ops exact), gradients against torch.autograd within 1e-5 of the
largest gradient (in float64), on shapes that
hypothesis draws (broadcasting, sizes that match no tile) and on inputs that are transposed,
sliced or expanded views. The F64 finite-difference checks are in
tests/library_tensor_gradcheck_test.cpp."""
from __future__ import annotations

import math
import pathlib

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, mutually_broadcastable_shapes

import kael

# No deadline and no too_slow check: the strategies are cheap, so a slow draw only means the
# machine was busy elsewhere (a shared CI host), which says nothing about kael.
SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LAYOUTS = ["contiguous", "transposed", "sliced", "expanded"]


def largest(values) -> float:
    """The largest finite magnitude (a NaN, as var of one element gives, sets no scale)."""
    values = np.abs(np.asarray(values, dtype=np.float64))
    finite = values[np.isfinite(values)]
    return float(finite.max()) if finite.size else 0.0


def close(got, want, rtol=1e-6, scale=0.0):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    # 1e-12 absolute: F32 rounding of a result that is exactly 0 (the variance of equal values)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * max(scale, largest(want)) + 1e-12)


class Pair:
    """The same leaf values in kael and torch, and the same view of them (`layout`)."""

    def __init__(self, shape, rng, layout="contiguous", transform=None):
        base_shape = list(shape)
        if layout == "transposed" and len(shape) >= 2:
            base_shape[-1], base_shape[-2] = shape[-2], shape[-1]
        elif layout == "sliced":
            base_shape = [2 * n for n in shape]
        elif layout == "expanded":
            base_shape = [1 if i % 2 == 0 else n for i, n in enumerate(shape)]
        values = rng.standard_normal(base_shape).astype(np.float32)
        if transform is not None:
            values = transform(values).astype(np.float32)
        self.layout, self.shape = layout, tuple(shape)
        self.k_leaf = kael.tensor(values, requires_grad=True)
        self.t_leaf = torch.tensor(values, requires_grad=True)
        self.t64_leaf = torch.tensor(values, dtype=torch.float64, requires_grad=True)

    def view(self, lib, leaf=None):
        if leaf is None:
            leaf = self.k_leaf if lib is kael else self.t_leaf
        if self.layout == "transposed" and len(self.shape) >= 2:
            return leaf.transpose(-1, -2)
        if self.layout == "sliced":
            index = tuple(slice(1, None, 2) for _ in self.shape)
            return leaf[index]
        if self.layout == "expanded":
            return leaf.expand(*self.shape)
        return leaf


def check(fn, pairs, rng, grad=True):
    """Runs fn(lib, *views) in both libraries; compares the values and, by a random weighting
    of the output, the gradients of every leaf."""
    k_out = fn(kael, *[p.view(kael) for p in pairs])
    t_out = fn(torch, *[p.view(torch) for p in pairs])
    with torch.no_grad():  # what the terms of a sum add up to without cancelling
        magnitude = largest(fn(torch, *[p.view(torch, p.t_leaf.abs()) for p in pairs]))
    close(k_out.detach().numpy(), t_out.detach().numpy(), scale=magnitude)
    assert k_out.shape == tuple(t_out.shape)
    if not grad:
        return
    # Gradients against torch in float64 on the same values: F32 leaves noise where the terms of
    # a gradient cancel (an expanded input), so the bound is 1e-5 of the largest gradient or of
    # the largest gradient flowing in (`weight`), whichever is larger.
    weight = rng.standard_normal(tuple(t_out.shape)).astype(np.float32)
    (k_out * kael.tensor(weight)).sum().backward()
    t64_out = fn(torch, *[p.view(torch, p.t64_leaf) for p in pairs])
    (t64_out * torch.tensor(weight, dtype=torch.float64)).sum().backward()
    for p in pairs:
        want = p.t64_leaf.grad.numpy()
        bound = 1e-5 * max(largest(want), largest(weight))
        np.testing.assert_allclose(p.k_leaf.grad.numpy(), want, rtol=0, atol=bound)


def functional(lib):
    return lib.nn.functional


def positive(x):
    return np.abs(x) + 0.5


UNARY = {
    "neg": lambda lib, x: -x,
    "abs": lambda lib, x: x.abs(),
    "exp": lambda lib, x: lib.exp(x),
    "log": lambda lib, x: lib.log(x.abs() + 0.5),
    "sqrt": lambda lib, x: (x * x + 0.1).sqrt(),
    "rsqrt": lambda lib, x: lib.rsqrt(x * x + 0.1),
    "tanh": lambda lib, x: x.tanh(),
    "sigmoid": lambda lib, x: lib.sigmoid(x),
    "relu": lambda lib, x: x.relu(),
    "gelu": lambda lib, x: functional(lib).gelu(x),
    "gelu_tanh": lambda lib, x: functional(lib).gelu(x, approximate="tanh"),
    "pow_scalar": lambda lib, x: (x * x + 0.1) ** 1.5,
    "square": lambda lib, x: x ** 2,
    "scalar_ops": lambda lib, x: (2 - x) * 3 + x / 4 - 1,
    "reciprocal": lambda lib, x: 2 / (x * x + 0.5),
    "rpow": lambda lib, x: 2 ** x,
    "softmax": lambda lib, x: x.softmax(-1),
    "log_softmax": lambda lib, x: x.log_softmax(0),
    "log_softmax_last": lambda lib, x: x.log_softmax(-1),
    "sum": lambda lib, x: x.sum(),
    "sum_dim": lambda lib, x: x.sum(-1, keepdim=True),
    "mean": lambda lib, x: x.mean(0),
    "var": lambda lib, x: x.var(-1),
    "var_biased": lambda lib, x: x.var(0, correction=0),
    "max_dim": lambda lib, x: x.max(-1).values,
    "min_dim": lambda lib, x: x.min(0, keepdim=True).values,
    "max_all": lambda lib, x: x.max(),
    "reshape": lambda lib, x: x.reshape(-1) * 2,
    "clone": lambda lib, x: x.clone() * 2,
    "contiguous": lambda lib, x: x.contiguous() * x,
    "permute_unsqueeze": lambda lib, x: x.permute(*reversed(range(x.dim()))).unsqueeze(0),
    "masked_fill": lambda lib, x: x.masked_fill(x > 0.5, -2.0),
    "getitem": lambda lib, x: x[..., :1] * x[..., -1:],
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("layout", LAYOUTS)
@SETTINGS
@given(shape=array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=9), seed=st.integers(0, 2**32 - 1))
def test_unary_ops(name, layout, shape, seed):
    rng = np.random.default_rng(seed)
    check(UNARY[name], [Pair(shape, rng, layout)], rng)


def test_gelu_keeps_its_negative_tail():
    """F32 gelu (erf form) where 1 + erf(x / sqrt(2)) is below the float spacing at 1: within 2% of
    0.5 x erfc(-x / sqrt(2)), where adding erf to 1 in F32 gives 0 (and so does torch's F32 gelu);
    the gradient Phi(x) + x phi(x) the same way. Larger inputs, and torch, in test_unary_ops."""
    x = np.linspace(-9, -3, 2001, dtype=np.float32)
    x64 = x.astype(np.float64)
    want = np.array([0.5 * v * math.erfc(-v / math.sqrt(2)) for v in x64])
    want_grad = np.array([0.5 * math.erfc(-v / math.sqrt(2)) + v * math.exp(-v * v / 2) / math.sqrt(2 * math.pi)
                          for v in x64])
    leaf = kael.tensor(x, requires_grad=True)
    out = kael.nn.functional.gelu(leaf)
    out.sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), want, rtol=0.02, atol=0)
    np.testing.assert_allclose(leaf.grad.numpy(), want_grad, rtol=0.05, atol=0)


BINARY = {
    "add": lambda lib, x, y: x + y,
    "add_alpha": lambda lib, x, y: lib.add(x, y, alpha=-0.5),
    "sub": lambda lib, x, y: x - y,
    "mul": lambda lib, x, y: x * y,
    "div": lambda lib, x, y: x / (y * y + 0.5),
    "pow": lambda lib, x, y: (x * x + 0.5) ** y,
    "maximum": lambda lib, x, y: lib.maximum(x, y),
    "minimum": lambda lib, x, y: lib.minimum(x, y),
    "where": lambda lib, x, y: lib.where(x > y, x * 2, y),
    "in_graph_mix": lambda lib, x, y: (x * y).tanh() + (x - y).exp() * 0.1,
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("layout", LAYOUTS)
@SETTINGS
@given(shapes=mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=1, max_side=7),
       seed=st.integers(0, 2**32 - 1))
def test_binary_ops_broadcast(name, layout, shapes, seed):
    rng = np.random.default_rng(seed)
    x_shape, y_shape = shapes.input_shapes
    pairs = [Pair(x_shape, rng, layout if x_shape else "contiguous"), Pair(y_shape, rng)]
    check(BINARY[name], pairs, rng)


@SETTINGS
@given(m=st.integers(1, 33), k=st.integers(1, 70), n=st.integers(1, 33), batch=st.sampled_from([(), (3,), (2, 1)]),
       other_batch=st.sampled_from([(), (1,), (4, 1)]), transposed=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_matmul_batched_broadcast(m, k, n, batch, other_batch, transposed, seed):
    rng = np.random.default_rng(seed)
    if len(batch) == 2 and len(other_batch) == 2:
        other_batch = (1, 4)
    a = Pair((*batch, m, k), rng, "transposed" if transposed else "contiguous")
    b = Pair((*other_batch, k, n), rng)
    check(lambda lib, x, y: x @ y, [a, b], rng)


@pytest.mark.parametrize("shapes", [((13,), (13,)), ((13,), (13, 5)), ((7, 13), (13,)), ((13,), (2, 13, 5)),
                                    ((2, 3, 7, 13), (13,))])
def test_matmul_vectors(shapes):
    rng = np.random.default_rng(1)
    check(lambda lib, x, y: lib.matmul(x, y), [Pair(s, rng) for s in shapes], rng)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("a_shape", [(4, 5, 7), (2, 3, 5, 7), (3, 0, 7), (0, 5, 7)])
def test_matmul_batch_by_matrix(a_shape, layout):
    """(..., M, K) @ (K, N) runs as one (... * M, K) product, views that cannot be folded in place
    included: values and gradients as torch's."""
    rng = np.random.default_rng(3)
    check(lambda lib, x, w: x @ w, [Pair(a_shape, rng, layout), Pair((7, 6), rng, "transposed")], rng)
    check(lambda lib, x, w, b: functional(lib).linear(x, w, b), [Pair(a_shape, rng, layout), Pair((6, 7), rng),
                                                                   Pair((6,), rng)], rng)


def test_matmul_batch_by_matrix_without_inner_dim():
    rng = np.random.default_rng(4)
    check(lambda lib, x, w: x @ w, [Pair((2, 3, 0), rng), Pair((0, 4), rng)], rng)


@pytest.mark.parametrize("bias", [True, False])
def test_linear(bias):
    rng = np.random.default_rng(2)
    pairs = [Pair((2, 5, 19), rng), Pair((7, 19), rng)] + ([Pair((7,), rng)] if bias else [])
    check(lambda lib, x, w, *b: functional(lib).linear(x, w, *b), pairs, rng)


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape, layout", [((3, 5, 13), "transposed"), ((3, 5, 13), "contiguous"), ((13,), "contiguous"),
                                           ((3, 70001), "contiguous")])
def test_layer_norm(affine, shape, layout):
    rng = np.random.default_rng(3)
    C = shape[-1]
    pairs = [Pair(shape, rng, layout)] + ([Pair((C,), rng), Pair((C,), rng)] if affine else [])
    check(lambda lib, x, *wb: functional(lib).layer_norm(x, (C,), *wb, eps=1e-5), pairs, rng)


def test_layer_norm_over_two_dims():
    rng = np.random.default_rng(4)
    pairs = [Pair((3, 5, 6), rng), Pair((5, 6), rng), Pair((5, 6), rng)]
    check(lambda lib, x, w, b: functional(lib).layer_norm(x, [5, 6], w, b), pairs, rng)


@pytest.mark.parametrize("rows, classes, layout", [(9, 11, "transposed"), (9, 11, "contiguous"), (37, 5003, "contiguous")])
def test_cross_entropy_with_ignore_index(rows, classes, layout):
    rng = np.random.default_rng(5)
    targets = rng.integers(0, classes, size=rows)
    targets[[2, 5]] = -100
    k_target, t_target = kael.tensor(targets), torch.tensor(targets)
    check(lambda lib, x: functional(lib).cross_entropy(x, k_target if lib is kael else t_target),
          [Pair((rows, classes), rng, layout)], rng)


def test_cross_entropy_with_every_target_ignored_is_nan_as_torch():
    logits = np.random.default_rng(7).standard_normal((3, 4)).astype(np.float32)
    ignored = np.full(3, -100)
    assert np.isnan(kael.nn.functional.cross_entropy(kael.tensor(logits), kael.tensor(ignored)).item())
    assert np.isnan(torch.nn.functional.cross_entropy(torch.tensor(logits), torch.tensor(ignored)).item())


def test_embedding_and_index_select():
    rng = np.random.default_rng(6)
    ids = rng.integers(0, 10, size=(3, 4))
    k_ids, t_ids = kael.tensor(ids), torch.tensor(ids)
    check(lambda lib, w: functional(lib).embedding(k_ids if lib is kael else t_ids, w), [Pair((10, 6), rng)], rng)
    index = np.array([4, 0, 4, 2])
    check(lambda lib, x: lib.index_select(x, 1, kael.tensor(index) if lib is kael else torch.tensor(index)),
          [Pair((3, 5), rng, "sliced")], rng)


def test_cat_stack_and_views():
    rng = np.random.default_rng(7)
    pairs = [Pair((3, 4), rng, "transposed"), Pair((3, 4), rng)]
    check(lambda lib, x, y: lib.cat([x, y * 2], dim=1), pairs, rng)
    pairs = [Pair((3, 4), rng), Pair((3, 4), rng, "sliced")]
    check(lambda lib, x, y: lib.stack([x, y], dim=-1).flatten(1), pairs, rng)
    check(lambda lib, x: x.narrow(1, 1, 2).select(0, 2).unsqueeze(1).expand(2, 3), [Pair((3, 4), rng)], rng)


@pytest.mark.parametrize("case", ["causal_kernel", "causal_cross", "bool_mask", "float_mask", "scaled"])
def test_scaled_dot_product_attention(case):
    rng = np.random.default_rng(8)
    L, S = (7, 7) if case in ("causal_kernel", "scaled") else (7, 11)
    pairs = [Pair((2, 3, L, 13), rng), Pair((2, 3, S, 13), rng, "transposed"), Pair((2, 3, S, 13), rng)]
    mask = rng.random((L, S)) > 0.3
    mask[:, 0] = True  # every row attends to something
    if case == "float_mask":
        mask = np.where(mask, 0.0, -1e4).astype(np.float32)
    options = {"causal_kernel": dict(is_causal=True), "causal_cross": dict(is_causal=True),
               "scaled": dict(is_causal=True, scale=0.3)}.get(case, {})

    def attention(lib, q, k, v):
        extra = dict(options)
        if case in ("bool_mask", "float_mask"):
            extra["attn_mask"] = kael.tensor(mask) if lib is kael else torch.tensor(mask)
        return functional(lib).scaled_dot_product_attention(q, k, v, **extra)
    check(attention, pairs, rng)


@pytest.mark.parametrize("heads,L,E", [(1, 19, 7), (2, 37, 13), (3, 17, 5), (2, 70, 16)])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_causal_attention_on_the_training_kernels(heads, L, E, layout):
    """F32 causal self-attention at the default scale with a gradient runs on the training kernels
    (the forward keeps the probabilities, the backward is scaled_dot_product_attention_backward):
    lengths no multiple of 16, odd head sizes, 1 to 3 heads, every layout, and k broadcast over
    the batch."""
    rng = np.random.default_rng(9)
    pairs = [Pair((2, heads, L, E), rng, layout), Pair((heads, L, E), rng, layout), Pair((2, heads, L, E), rng)]
    check(lambda lib, q, k, v: functional(lib).scaled_dot_product_attention(q, k, v, is_causal=True), pairs, rng)


@pytest.mark.parametrize("B,heads,L,E,extra",
                         [(2, 4, 19, 8, 0), (3, 2, 37, 13, 0), (1, 3, 70, 16, 0), (2, 2, 17, 5, 3)])
def test_causal_attention_on_heads_split_from_one_tensor(B, heads, L, E, extra):
    """nanoGPT's attention: q, k, v split from one (B, L, 3C) tensor (`extra` columns beyond 3C
    in its rows) and viewed as heads, which the kernels read in place (rows 3C + extra apart), the
    output in the transposed layout torch's CPU attention gives, the gradients written into one
    buffer; against torch in float64 with and without a gradient, and to the bit equal to the same
    values copied first (the kernels' other path) and on 1 and 2 threads."""
    C = heads * E

    def attention(lib, x):
        q, k, v = x[..., : 3 * C].split(C, dim=2)
        q, k, v = (t.view(B, L, heads, E).transpose(1, 2) for t in (q, k, v))
        y = functional(lib).scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.transpose(1, 2).contiguous().view(B, L, C) * 1.5

    rng = np.random.default_rng(10)
    pair = Pair((B, L, 3 * C + extra), rng)
    check(attention, [pair], rng)
    with kael.no_grad(), torch.no_grad():
        close(attention(kael, pair.k_leaf).numpy(), attention(torch, pair.t_leaf).numpy(), scale=10.0)
    x = kael.tensor(pair.k_leaf.detach().numpy())
    weight = kael.tensor(rng.standard_normal((B, L, C)).astype(np.float32))

    def run(threads, copied):
        kael.set_num_threads(threads)
        leaf = x.detach().requires_grad_()
        q, k, v = leaf[..., : 3 * C].split(C, dim=2)
        q, k, v = (t.view(B, L, heads, E).transpose(1, 2) for t in (q, k, v))
        if copied:
            q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        y = functional(kael).scaled_dot_product_attention(q, k, v, is_causal=True)
        (y.transpose(1, 2).reshape(B, L, C) * weight).sum().backward()
        with kael.no_grad():
            inference = functional(kael).scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.detach().numpy(), leaf.grad.numpy(), inference.numpy()

    before = kael.get_num_threads()
    try:
        want = run(1, copied=True)
        for threads, copied in ((1, False), (2, False), (2, True)):
            for got, expected in zip(run(threads, copied), want):
                np.testing.assert_array_equal(got, expected)
    finally:
        kael.set_num_threads(before)


def test_split_pieces_add_into_one_gradient():
    """split's pieces add their gradients into the gradient of the whole in place (slice's
    backward in place): pieces used in other ops, one used twice, one unused, one also retained,
    and the whole used elsewhere too, against torch."""
    rng = np.random.default_rng(11)

    def pieces(lib, x):
        a, b, c, d = x.split([2, 3, 1, 4], dim=1)
        rows = (a * 2).sum(1, keepdim=True) + b.exp().sum(1, keepdim=True) * b[:, :1]
        return rows + d.tanh().sum(1, keepdim=True) + x.sum(1, keepdim=True)

    check(pieces, [Pair((5, 10), rng)], rng)
    check(pieces, [Pair((5, 10), rng, "transposed")], rng)
    check(lambda lib, x: pieces(lib, x * 1), [Pair((5, 10), rng)], rng)
    x = kael.tensor(rng.standard_normal((4, 6)).astype(np.float32), requires_grad=True)
    a, b = x.split(3, dim=1)
    a.retain_grad()
    seen = []
    b.register_hook(lambda g: seen.append(g.numpy().copy()))
    (a * 3 + b * 5).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.full((4, 3), 3, np.float32))
    np.testing.assert_array_equal(seen[0], np.full((4, 3), 5, np.float32))
    np.testing.assert_array_equal(x.grad.numpy(), np.repeat(np.array([[3, 3, 3, 5, 5, 5]], np.float32), 4, axis=0))


# ---- integer and bool ops: exact


@SETTINGS
@given(shapes=mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=6), seed=st.integers(0, 2**32 - 1))
def test_integer_and_bool_ops_are_exact(shapes, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(-50, 50, size=shapes.input_shapes[0])
    b = rng.integers(1, 50, size=shapes.input_shapes[1])
    for fn in [lambda lib, x, y: x + y * 3 - 1, lambda lib, x, y: x * y, lambda lib, x, y: x < y,
               lambda lib, x, y: (x >= y) == (x > 0), lambda lib, x, y: lib.maximum(x, y), lambda lib, x, y: x.abs() ** 2,
               lambda lib, x, y: lib.where(x > 0, x, y), lambda lib, x, y: x != 3]:
        got = fn(kael, kael.tensor(a), kael.tensor(b))
        want = fn(torch, torch.tensor(a), torch.tensor(b))
        assert got.dtype == str(want.dtype).removeprefix("torch."), (got.dtype, want.dtype)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    if a.ndim:
        assert kael.tensor(a).sum(-1).tolist() == torch.tensor(a).sum(-1).tolist()
        assert kael.tensor(a).argmax(-1).tolist() == torch.tensor(a).argmax(-1).tolist()
        assert kael.tensor(a).max(0).indices.tolist() == torch.tensor(a).max(0).indices.tolist()


def test_type_promotion_matches_torch():
    cases = [(kael.int64, kael.float32), (kael.bool, kael.int64), (kael.float32, kael.float64), (kael.bool, kael.float32)]
    names = {kael.int64: torch.int64, kael.float32: torch.float32, kael.float64: torch.float64, kael.bool: torch.bool}
    for a, b in cases:
        assert kael.promote_types(a, b) == str(torch.promote_types(names[a], names[b])).removeprefix("torch.")
    assert (kael.tensor([1, 2]) / 2).dtype == kael.float32
    assert (kael.tensor([1, 2]) * 2.5).dtype == kael.float32
    assert (kael.tensor([1.0], dtype=kael.float64) * kael.tensor([2])).dtype == kael.float64
    assert (kael.tensor([True]) + 1).dtype == kael.int64


def test_creation_matches_torch():
    assert kael.arange(5).tolist() == torch.arange(5).tolist() and kael.arange(5).dtype == kael.int64
    close(kael.arange(0, 1, 0.125).numpy(), torch.arange(0, 1, 0.125).numpy())
    close(kael.linspace(-1, 2, 7).numpy(), torch.linspace(-1, 2, 7).numpy())
    assert kael.eye(3).tolist() == torch.eye(3).tolist()
    assert kael.full((2, 3), 7).dtype == kael.int64 and kael.full((2,), 0.5).dtype == kael.float32
    assert kael.zeros(2, 3).shape == kael.zeros((2, 3)).shape == kael.zeros([2, 3]).shape == (2, 3)
    assert kael.ones(2, dtype=kael.int64).tolist() == [1, 1]
    assert kael.tensor([[1.5, 2]]).dtype == kael.float32 and kael.tensor([1, 2]).dtype == kael.int64
    assert kael.tensor(np.zeros(2)).dtype == kael.float64 and kael.tensor(True).dtype == kael.bool


def test_manual_seed_reproduces_every_random_stream():
    def draw():
        kael.manual_seed(1234)
        return [kael.rand(5).tolist(), kael.randn(2, 3).tolist(), kael.randint(0, 10, (4,)).tolist(),
                kael.nn.functional.dropout(kael.ones(8), 0.5).tolist()]
    first, second = draw(), draw()
    assert first == second
    values = np.asarray(first[2])
    assert ((0 <= values) & (values < 10)).all()
    assert set(np.asarray(first[3]).tolist()) <= {0.0, 2.0}


# ---- autograd semantics


def test_gradients_accumulate_and_the_graph_is_freed():
    x = kael.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * x).sum().backward()
    (x * 3).sum().backward()
    assert x.grad.tolist() == [5.0, 7.0, 9.0]
    y = (x * x).sum()
    y.backward()
    with pytest.raises(ValueError, match="backward"):
        y.backward()
    z = (x ** 2).sum()
    z.backward(retain_graph=True)
    z.backward()
    x.grad = None
    assert x.grad is None
    (x * 2).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_backward_needs_a_scalar_or_a_gradient():
    x = kael.ones(2, 3, requires_grad=True)
    y = x * 2
    with pytest.raises(ValueError, match="one-element"):
        y.backward()
    y.backward(kael.ones(2, 3) * 0.5)
    assert x.grad.tolist() == [[1.0] * 3] * 2
    with pytest.raises(ValueError):
        (x * 2).backward(kael.ones(3))


def test_in_place_change_of_a_saved_tensor_is_an_error_naming_the_op():
    a = kael.ones(3, requires_grad=True)
    b = kael.tensor([1.0, 2.0, 3.0])
    y = (a * b).sum()
    b += 1  # mul saved b for a's gradient
    with pytest.raises(ValueError, match="mul"):
        y.backward()


def test_no_grad_and_detach():
    x = kael.ones(2, requires_grad=True)
    with kael.no_grad():
        y = x * 2
        with kael.enable_grad():
            z = x * 2
    assert not y.requires_grad and z.requires_grad and kael.is_grad_enabled()

    @kael.no_grad()
    def doubled(t):
        return t * 2
    assert not doubled(x).requires_grad
    with kael.set_grad_enabled(False):
        assert not kael.is_grad_enabled()
    assert kael.is_grad_enabled()
    d = x.detach()
    assert not d.requires_grad and d.is_leaf
    with pytest.raises(TypeError, match="detach"):
        x.numpy()


def test_sgd_fits_a_line():
    kael.manual_seed(0)
    x = kael.linspace(-1, 1, 32).unsqueeze(1)
    y = 3 * x - 0.5
    w = kael.zeros(1, 1, requires_grad=True)
    b = kael.zeros(1, requires_grad=True)
    for _ in range(200):
        loss = ((kael.nn.functional.linear(x, w, b) - y) ** 2).mean()
        w.grad = None
        b.grad = None
        loss.backward()
        with kael.no_grad():
            w -= 0.5 * w.grad
            b -= 0.5 * b.grad
    assert abs(w.item() - 3) < 1e-3 and abs(b.item() + 0.5) < 1e-3


# ---- errors: the Python exception that matches, naming the op and the shapes


def test_errors_name_the_op_and_the_shapes():
    with pytest.raises(ValueError, match=r"add.*\[2, 3\].*\[4\]"):
        kael.ones(2, 3) + kael.ones(4)
    with pytest.raises(ValueError, match=r"matmul.*\[2, 3\].*\[4, 5\]"):
        kael.ones(2, 3) @ kael.ones(4, 5)
    with pytest.raises(IndexError, match="dim"):
        kael.ones(2, 3).sum(5)
    with pytest.raises(IndexError, match="out of range"):
        kael.ones(2)[2]
    with pytest.raises(TypeError):
        kael.ones(2) + "a"
    with pytest.raises(TypeError, match="dtype"):
        kael.zeros(2, dtype="complex64")
    with pytest.raises(ValueError, match="view"):
        kael.ones(2, 3).view(4)
    with pytest.raises(kael.Error, match="cuda"):
        kael.ones(2).to("cuda")
    assert issubclass(kael.ValueError, ValueError) and issubclass(kael.IndexError, IndexError)


# ---- numpy: shared memory both ways


def test_numpy_exchange_shares_memory():
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = kael.from_numpy(array)
    t[0] = -1.0
    assert array[0].tolist() == [-1.0] * 4
    array[2, 3] = 99
    assert t[2, 3].item() == 99
    view = t.T.numpy()
    view[0, 1] = 5
    assert t[1, 0].item() == 5 and np.shares_memory(view, array)
    strided = kael.from_numpy(array[:, ::2])
    assert strided.shape == (3, 2) and strided.tolist() == array[:, ::2].tolist()
    del array, view
    assert t.sum().item() == pytest.approx(float(np.arange(12).sum() - 0 - 1 - 2 - 3 - 4 + 99 - 11 + 5 - 4))
    frozen = np.zeros(3)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        kael.from_numpy(frozen)
    assert np.asarray(kael.ones(2, 2)).tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_repr_shows_values_shape_and_dtype():
    text = repr(kael.tensor([[1.0, 2.5]], requires_grad=True))
    assert "1.0000" in text and "2.5000" in text and "shape=[1, 2]" in text and "requires_grad=True" in text
    assert repr(kael.float32) == "kael.float32" and kael.float32 == "F32" and kael.ones(1).dtype is kael.float32


def test_the_readme_tensor_example_runs_and_learns():
    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    start = readme.index("The tensor library in Python has PyTorch's names")
    block = readme[readme.index("```python\n", start) + len("```python\n"):readme.index("```\n", readme.index("```python\n", start) + 10)]
    namespace: dict = {}
    exec(compile(block.replace("print(", "_ = ("), "README.md", "exec"), namespace)
    w, x = namespace["w"], namespace["x"]
    before = ((x * namespace["w"].detach() - 3 * x) ** 2).mean().item()
    assert w.grad.shape == (1, 1)
    kael.manual_seed(0)
    w0 = kael.randn(1, 1).item()
    grad = ((2 * (x * w0 - 3 * x) * x).mean()).item()  # d/dw mean((x w - 3x)^2)
    assert w.grad.item() == pytest.approx(grad, rel=1e-5)
    assert w.item() == pytest.approx(w0 - 0.1 * grad, rel=1e-6)
    assert before < ((x * w0 - 3 * x) ** 2).mean().item()  # the step lowered the loss
