"""kael.set_float32_matmul_precision against torch's: "medium" makes matmul and linear (forward and
backward) multiply BF16-rounded operands with F32 sums (what `kael train --precision bf16` sets
around kael.GPT; test_train_bf16.py holds that step to torch's autocast).

The reference for one product is torch's F64 product of x.bfloat16().double() operands (round to
nearest even, as kael rounds). kael sums in F32, so each result may differ from it by F32
summation's worst case: 2 (n + 1) u_f32 times the same product on the operands' absolute values,
n the F32 additions on the way to that element (K for the forward; for a gradient, the products
that reach one element, out.numel() K / its numel(), broadcast batches included). Each test also
checks that the result is further than that from the unrounded operands' product: the BF16 path
ran, not F32's.
"""
import numpy as np
import pytest

import kael
import kael.nn.functional as F
from train_support import bf16_refusal

torch = pytest.importorskip("torch")

U_F32 = 2.0 ** -24


@pytest.fixture(autouse=True)
def restore_the_default():
    yield
    kael.set_float32_matmul_precision("highest")


@pytest.fixture(scope="module")
def bf16_products():
    """Skips, naming what is missing, where this CPU or kernel set has no BF16 product: kael then
    runs "medium" as "highest", and a run at precision bf16 is refused with the
    reason, from the same kernels::gemm_bf16_available."""
    why = bf16_refusal()
    if why:
        pytest.skip(f"no BF16 products here: {why}")
    return True


def test_the_setting_is_torchs():
    assert kael.get_float32_matmul_precision() == torch.get_float32_matmul_precision() == "highest"
    for value in ("medium", "high", "highest"):
        kael.set_float32_matmul_precision(value)
        assert kael.get_float32_matmul_precision() == value
    kael.set_float32_matmul_precision("medium")
    for bad in ("low", "MEDIUM", "bf16", ""):
        with pytest.raises(kael.ValueError, match='"highest", "high" or "medium"'):
            kael.set_float32_matmul_precision(bad)
        assert kael.get_float32_matmul_precision() == "medium"
    with pytest.raises(TypeError):
        kael.set_float32_matmul_precision(1)


def _rounded(array):
    return torch.from_numpy(np.asarray(array, dtype=np.float32)).bfloat16().double()


def _check(got, exact, bound, terms, unrounded, unrounded_bound, what):
    """got within F32 summation of exact, and not within it of the unrounded product."""
    got = np.asarray(got, dtype=np.float64)
    tol = 2 * (terms + 1) * U_F32 * bound.detach().numpy()
    error = np.abs(got - exact.detach().numpy())
    assert (error <= tol).all(), f"{what}: {error.max():.3g} off the BF16 reference, {(error - tol).max():.3g} over"
    if unrounded is not None:
        off = np.abs(got - unrounded.detach().numpy()) - 2 * (terms + 1) * U_F32 * unrounded_bound.detach().numpy()
        assert off.max() > 0, f"{what}: within F32 summation of the unrounded product (no BF16 rounding)"


def _torch_product(a, b, g, op, rounding):
    """op(a, b, absolute) in F64 on the operands as `rounding` makes them, its backward with g
    likewise (the gradient's products round g as kael's do), and the same on absolute values:
    the values and bounds of the output and both gradients."""
    results = []
    for absolute in (False, True):
        ta, tb, tg = (rounding(v) for v in (a, b, g))
        if absolute:
            ta, tb, tg = ta.abs(), tb.abs(), tg.abs()
        ta.requires_grad_()
        tb.requires_grad_()
        out = op(ta, tb, absolute)
        out.backward(tg)
        results.append((out, ta.grad, tb.grad))
    return results


PRODUCTS = {
    "37x45 @ 45x29": ((37, 45), (45, 29), None),
    "batched 3x1x17x65 @ 2x65x9": ((3, 1, 17, 65), (2, 65, 9), None),
    "(70x33)^T @ 70x19, transposed view": ((70, 33), (70, 19), "t_a"),
    "every other column of 11x62 @ 31x13": ((11, 62), (31, 13), "step_a"),
    "2x5x33 @ 33x21": ((2, 5, 33), (33, 21), None),
    "one row 1x130 @ 130x7": ((1, 130), (130, 7), None),
    "13x33 @ vector": ((13, 33), (33,), None),
}


def _matmul(ta, tb, absolute):
    return torch.matmul(ta, tb)


def _unrounded(array):
    return torch.from_numpy(np.asarray(array, dtype=np.float32)).double()


def _view(t, kind):
    if kind == "t_a":
        return t.transpose(0, 1)
    if kind == "step_a":
        return t[:, ::2]
    return t


@pytest.mark.parametrize("name", sorted(PRODUCTS))
def test_medium_matmul_and_its_gradients_against_torch(bf16_products, name):
    shape_a, shape_b, view = PRODUCTS[name]
    rng = np.random.default_rng(sorted(PRODUCTS).index(name))
    a_base = rng.standard_normal(shape_a).astype(np.float32)
    b = rng.standard_normal(shape_b).astype(np.float32)
    a = np.ascontiguousarray(_view(torch.from_numpy(a_base), view).numpy())
    out_shape = torch.matmul(torch.from_numpy(a), torch.from_numpy(b)).shape
    g = rng.standard_normal(out_shape).astype(np.float32)

    kael.set_float32_matmul_precision("medium")
    ka_base = kael.from_numpy(a_base).requires_grad_()
    ka = _view(ka_base, view)
    kb = kael.from_numpy(b).requires_grad_()
    out = kael.matmul(ka, kb)
    out.backward(kael.from_numpy(g))
    grad_a = _view(torch.from_numpy(ka_base.grad.numpy()), view).numpy()

    (e_out, e_ga, e_gb), (b_out, b_ga, b_gb) = _torch_product(a, b, g, _matmul, _rounded)
    (u_out, u_ga, u_gb), (ub_out, ub_ga, ub_gb) = _torch_product(a, b, g, _matmul, _unrounded)
    K, products = a.shape[-1], int(np.prod(out_shape)) * a.shape[-1]
    _check(out.detach().numpy(), e_out, b_out, K, u_out, ub_out, f"{name} forward")
    _check(grad_a, e_ga, b_ga, products // a.size, u_ga, ub_ga, f"{name} gradient of a")
    _check(kb.grad.numpy(), e_gb, b_gb, products // b.size, u_gb, ub_gb, f"{name} gradient of b")


@pytest.mark.parametrize("bias", [True, False])
def test_medium_nn_linear_and_its_gradients_against_torch(bf16_products, bias):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 7, 45)).astype(np.float32)
    g = rng.standard_normal((3, 7, 29)).astype(np.float32)
    layer = kael.nn.Linear(45, 29, bias=bias)
    kael.set_float32_matmul_precision("medium")
    kx = kael.from_numpy(x).requires_grad_()
    y = layer(kx)
    y.backward(kael.from_numpy(g))
    w = layer.weight.detach().numpy()

    tbias = torch.from_numpy(layer.bias.detach().numpy()).double() if bias else None

    def op(tx, tw, absolute):  # the bias is added in F32, never rounded
        return torch.nn.functional.linear(tx, tw, None if tbias is None else tbias.abs() if absolute else tbias)

    (e_y, e_gx, e_gw), (b_y, b_gx, b_gw) = _torch_product(x, w, g, op, _rounded)
    (u_y, u_gx, u_gw), (ub_y, ub_gx, ub_gw) = _torch_product(x, w, g, op, _unrounded)
    _check(y.detach().numpy(), e_y, b_y, 45 + 1, u_y, ub_y, "forward")
    _check(kx.grad.numpy(), e_gx, b_gx, 29, u_gx, ub_gx, "gradient of x")
    _check(layer.weight.grad.numpy(), e_gw, b_gw, 21, u_gw, ub_gw, "gradient of weight")
    if bias:  # a sum of g, not a product: F32 on the unrounded values
        rows = torch.from_numpy(g).double().reshape(-1, 29)
        _check(layer.bias.grad.numpy(), rows.sum(0), rows.abs().sum(0), 21, None, None, "gradient of bias")


def _mlp_loss():
    kael.manual_seed(3)
    model = kael.nn.Sequential(kael.nn.Linear(40, 64), kael.nn.Tanh(), kael.nn.Linear(64, 10))
    x, target = kael.randn(32, 40), kael.randn(32, 10)
    loss = F.mse_loss(model(x), target)
    loss.backward()
    return loss.item(), model[0].weight.grad.numpy().copy()


def test_medium_changes_a_models_loss_and_highest_restores_it(bf16_products):
    highest = _mlp_loss()
    kael.set_float32_matmul_precision("medium")
    medium = _mlp_loss()
    kael.set_float32_matmul_precision("highest")
    again = _mlp_loss()
    assert medium[0] != highest[0]
    assert abs(medium[0] - highest[0]) <= 1e-2 * abs(highest[0])  # BF16's rounding, not another model
    assert not np.array_equal(medium[1], highest[1])
    assert again[0] == highest[0] and np.array_equal(again[1], highest[1])


def test_high_runs_as_highest():
    highest = _mlp_loss()
    kael.set_float32_matmul_precision("high")
    high = _mlp_loss()
    assert high[0] == highest[0] and np.array_equal(high[1], highest[1])
