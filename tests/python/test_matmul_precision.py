"""kael.set_float32_matmul_precision against torch's: "medium" makes matmul and linear (forward and
backward) multiply BF16-rounded operands with F32 sums, and the book's kael.GPT under it trains
with the arithmetic of the hand-written step at precision "bf16" (kael.TrainModel, what
`kael train --precision bf16` runs).

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

import gpt2_reference
import kael
import kael.nn.functional as F

torch = pytest.importorskip("torch")

U_F32 = 2.0 ** -24
THREADS = 2


@pytest.fixture(autouse=True)
def restore_the_default():
    yield
    kael.set_float32_matmul_precision("highest")


# Small checkpoints at GPT-2's weight scale, n_embd 80 (not a multiple of 32, the BF16 K chunk): a
# vocabulary inside one block of the hand-written step's fused head (2048 entries) and one over it.
GPT_CONFIGS = {
    "one head block": dict(n_layer=2, n_head=4, n_embd=80, n_positions=64, vocab_size=2000, dtype="float32",
                           seed=11, init_std=0.02),
    "two head blocks": dict(n_layer=2, n_head=4, n_embd=80, n_positions=64, vocab_size=3000, dtype="float32",
                            seed=11, init_std=0.02),
}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("precision")
    return {name: gpt2_reference.make_checkpoint(root / name.replace(" ", "-"), **spec)
            for name, spec in GPT_CONFIGS.items()}


@pytest.fixture(scope="module")
def bf16_products(checkpoints):
    """Skips, naming what is missing, where this CPU or kernel set has no BF16 product: kael then
    runs "medium" as "highest" (checked below). The hand-written step refuses precision "bf16"
    there with the reason, from the same kernels::gemm_bf16_available."""
    hand = kael._kael.TrainModel.load(str(checkpoints["one head block"]), threads=THREADS)
    try:
        hand.precision = "bf16"
    except kael._kael.ValueError as error:
        pytest.skip(f"no BF16 products here: {error}")
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


def _gpt_step(directory, spec, inputs, targets):
    """kael.GPT's loss and every parameter's gradient, in the hand-written step's names and layout."""
    config = kael.nn.GptConfig(n_layer=spec["n_layer"], n_head=spec["n_head"], n_embd=spec["n_embd"],
                               n_positions=spec["n_positions"], vocab_size=spec["vocab_size"])
    net = kael.GPT(config).load_gpt2(directory).train()
    logits = net(kael.from_numpy(inputs))
    loss = F.cross_entropy(logits.reshape(-1, spec["vocab_size"]), kael.from_numpy(targets.reshape(-1)))
    loss.backward()
    return loss.item(), {n: p.grad.numpy() for n, p in net.named_parameters()}


def _hand_step(directory, inputs, targets, precision):
    hand = kael._kael.TrainModel.load(str(directory), threads=THREADS)
    hand.precision = precision
    loss = hand.forward_backward(inputs.astype(np.int32), targets.astype(np.int32))
    grads = {}
    for stored_name in hand.names:
        ours = kael.nn.translated_gpt2_name(stored_name)
        grad = hand.grad(stored_name)
        grads[ours] = grad.T if kael.nn.stored_transposed(ours) else grad
    return loss, grads


def _largest_difference(ours, theirs, names=None):
    """max |ours - theirs| over the parameters (all, or `names`), over the largest |theirs| of all."""
    assert ours.keys() == theirs.keys()
    difference = max(float(np.abs(ours[n] - theirs[n]).max()) for n in (names or theirs))
    return difference / max(float(np.abs(theirs[n]).max()) for n in theirs)


# The matrices of the blocks: their gradients are products only (x^T g), of operands that the two
# steps compute alike when the head is one block.
PRODUCT_GRADIENTS = [f"blocks.{layer}.{name}.weight" for layer in range(2)
                     for name in ("attn.qkv", "attn.proj", "mlp.fc1", "mlp.fc2")]


@pytest.mark.parametrize("name", sorted(GPT_CONFIGS))
def test_gpt_under_medium_trains_as_the_hand_written_bf16_step(checkpoints, bf16_products, name):
    """kael.GPT under "medium" and TrainModel at precision "bf16" on one checkpoint and batch.

    Both round the same operands to BF16 for the same products: the blocks' linear layers and the
    head, forward and backward, on kernels::gemm_bf16 (attention's small per-head products stay
    F32 in both, since scaled_dot_product_attention's causal training kernels are the hand-written
    step's own, and so are layer norm, GELU and cross-entropy). Measured on AVX512-BF16:
      - one head block (vocabulary 2000): the loss and every block matrix's gradient are the same
        bits; the rest (biases, layer norms, embeddings: F32 sums taken in another order, e.g.
        sum_to against the column sums beside the hand step's BF16 conversion) differ by 4.4e-7 of
        the largest gradient; the bound is the F32 steps' own, 1e-5.
      - two head blocks (vocabulary 3000): the hand step's head adds the input's gradient over its
        vocabulary blocks (two F32 sums added), where linear_backward takes one sum over the whole
        vocabulary; that moves the head's input gradient by F32 ulps, and where such a value sits
        next to a BF16 rounding boundary, the next product rounds it to the neighbouring BF16
        (2^-8 of it) in one step and not the other. Measured: 2.8e-4 of the largest gradient
        (BF16 against F32 in the hand step: 4.9e-3), the loss the same bits; the bound is 2^-10
        (9.8e-4), a quarter of one BF16 rounding of the largest value.
    Both also check that BF16 really ran: the hand step's bf16 and f32 gradients are over 1e-3
    apart (F32 nn and hand steps agree within 1e-5, test_train_paths.py)."""
    spec, directory = GPT_CONFIGS[name], checkpoints[name]
    window = np.random.default_rng(3).integers(0, spec["vocab_size"], size=(4, 49), dtype=np.int64)
    inputs, targets = np.ascontiguousarray(window[:, :-1]), np.ascontiguousarray(window[:, 1:])
    kael.set_num_threads(THREADS)
    hand_loss, hand_grads = _hand_step(directory, inputs, targets, "bf16")
    _, hand_f32_grads = _hand_step(directory, inputs, targets, "f32")
    kael.set_float32_matmul_precision("medium")
    loss, grads = _gpt_step(directory, spec, inputs, targets)

    gap = _largest_difference(grads, hand_grads)
    print(f"{name}: loss nn {loss!r}, hand {hand_loss!r}; largest gradient difference over the largest gradient "
          f"{gap:.3g} (hand bf16 against hand f32: {_largest_difference(hand_grads, hand_f32_grads):.3g})")
    assert _largest_difference(hand_grads, hand_f32_grads) > 1e-3
    assert abs(loss - hand_loss) <= 1e-6 * abs(hand_loss), (loss, hand_loss)  # measured: the same bits
    if name == "one head block":
        for parameter in PRODUCT_GRADIENTS:
            assert np.array_equal(grads[parameter], hand_grads[parameter]), parameter
        assert gap <= 1e-5, gap
    else:
        assert gap <= 2.0 ** -10, gap
