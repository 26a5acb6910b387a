"""Where kael follows torch's semantics that GPT-style scripts rely on: weight tying and shared
parameters, tensor identity of module attributes, view() of non-contiguous tensors, parameter
groups, in-place ops on tensors with history, autograd hooks and autograd.grad, to(), the
optimizers' signatures, kael.cuda, Size, set_default_dtype and inference_mode. Each is
checked against torch doing the same."""
from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

import kael


def test_weight_tying_shares_one_parameter_as_torch():
    for lib in (kael, torch):
        wte, head = lib.nn.Embedding(11, 4), lib.nn.Linear(4, 11, bias=False)
        model = lib.nn.ModuleDict({"wte": wte, "head": head})
        head.weight = wte.weight
        assert head.weight is wte.weight and wte.weight is wte.weight
        names = [n for n, _ in model.named_parameters()]
        assert names == ["wte.weight"], (lib.__name__, names)
        assert len(list(model.parameters())) == 1
        assert sorted(model.state_dict()) == ["head.weight", "wte.weight"]
        params = list(model.parameters())
        assert head.weight in params


def test_tied_gradient_is_the_sum_of_both_uses():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((7, 3)).astype(np.float32)
    grads = []
    for lib in (kael, torch):
        emb, head = lib.nn.Embedding(7, 3), lib.nn.Linear(3, 7, bias=False)
        with lib.no_grad():
            emb.weight.copy_(lib.tensor(w))
        head.weight = emb.weight
        ids = lib.tensor([[1, 2, 6]])
        loss = lib.nn.functional.cross_entropy(head(emb(ids)).view(-1, 7), lib.tensor([2, 6, 0]))
        loss.backward()
        grads.append(emb.weight.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("make", [
    lambda lib, x: x.split(4, dim=-1)[1],
    lambda lib, x: x.narrow(1, 2, 3),
    lambda lib, x: x.transpose(0, 1)[:, :, 1:],
    lambda lib, x: x[:, 1:3],
])
def test_view_of_non_contiguous_tensors_follows_torchs_stride_rule(make):
    values = np.arange(2 * 6 * 8, dtype=np.float32).reshape(2, 6, 8)
    shapes = [(-1,), (2, -1), (12, -1), (-1, 2), (1, -1, 1)]
    for shape in shapes:
        t = make(torch, torch.tensor(values))
        k = make(kael, kael.tensor(values))
        try:
            want = t.view(*shape)
        except RuntimeError:
            with pytest.raises(kael.ValueError, match="view"):
                k.view(*shape)
            continue
        got = k.view(*shape)
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_parameter_groups_with_weight_decay_on_some_as_torch():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((5, 4)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    x = rng.standard_normal((8, 4)).astype(np.float32)
    results = []
    for lib in (kael, torch):
        weight, bias = lib.tensor(w, requires_grad=True), lib.tensor(b, requires_grad=True)
        opt = lib.optim.AdamW([{"params": [weight], "weight_decay": 0.1}, {"params": [bias], "weight_decay": 0.0}],
                              lr=0.05, betas=(0.9, 0.95))
        assert [g["weight_decay"] for g in opt.param_groups] == [0.1, 0.0]
        for step in range(5):
            opt.param_groups[1]["lr"] = 0.05 / (step + 1)
            loss = ((lib.tensor(x) @ weight.T + bias) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        results.append((weight.detach().numpy().copy(), bias.detach().numpy().copy()))
    for got, want in zip(results[0], results[1]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_parameter_in_two_groups_is_refused():
    p = kael.zeros(3, requires_grad=True)
    with pytest.raises(kael.ValueError, match="more than once"):
        kael.optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)


def test_optimizer_signatures_are_torchs():
    for name in ("SGD", "Adam", "AdamW"):
        k = inspect.signature(getattr(kael.optim, name))
        t = inspect.signature(getattr(torch.optim, name))
        assert list(k.parameters)[:6] == list(t.parameters)[:6]
        assert "fused" in k.parameters


def test_in_place_ops_on_non_leaves_as_torch():
    values = np.array([1.0, -2.0, 3.0], dtype=np.float32)
    grads = []
    for lib in (kael, torch):
        x = lib.tensor(values, requires_grad=True)
        y = x * 2
        z = y * 3  # uses y before the write: its gradient path must not see the write
        y.mul_(2)
        y[0] = 0
        y.add_(x)
        y.masked_fill_(x < 0, 5.0)
        (y.sum() + z.sum()).backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1])


def test_a_view_taken_before_its_base_is_written_in_place_refuses_its_backward():
    values = np.array([1.0, -2.0, 3.0], dtype=np.float32)
    # torch rebuilds the old view's history (v = 4 x[:2] after the write); kael refuses the
    # backward through it rather than give the gradient of v = 2 x[:2].
    x = kael.tensor(values, requires_grad=True)
    y = x * 2
    v = y[:2]
    y.mul_(2)
    with pytest.raises(kael.ValueError, match=r"view \(made by slice\).*mul_"):
        (v * v).sum().backward()
    with pytest.raises(kael.ValueError, match="mul_"):
        kael.autograd.grad(v.sum(), x)
    assert x.grad is None
    # Uses of the view made before the write, and views taken after it, differentiate as torch's.
    grads = []
    for lib in (kael, torch):
        x = lib.tensor(values, requires_grad=True)
        y = x * 2
        before = y[:2] * 3
        y.mul_(2)
        after = y[1:]
        (before.sum() + (after * after).sum()).backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1])


def test_in_place_errors_name_the_op():
    leaf = kael.ones(3, requires_grad=True)
    for op, call in (("mul_", lambda: leaf.mul_(2)), ("fill_", lambda: leaf.fill_(0)), ("add_", lambda: leaf.add_(1)),
                     ("normal_", lambda: leaf.normal_())):
        with pytest.raises(kael.ValueError, match=op):
            call()
    y = kael.ones(3, requires_grad=True)
    e = y.exp()
    e.mul_(2)
    with pytest.raises(kael.ValueError, match="exp"):  # exp saved its output, which mul_ then changed
        e.sum().backward()


def test_hooks_retain_grad_and_autograd_grad_as_torch():
    values = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    seen = {}
    for lib in (kael, torch):
        x = lib.tensor(values, requires_grad=True)
        y = x.tanh()
        y.retain_grad()
        y.register_hook(lambda g: g * 2)
        handle = x.register_hook(lambda g: g + 1)
        (y * y).sum().backward()
        dx, = lib.autograd.grad((x ** 3).sum(), x)
        seen[lib.__name__] = (x.grad.numpy().copy(), y.grad.numpy().copy(), dx.numpy())
        handle.remove()
    for got, want in zip(seen["kael"], seen["torch"]):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    a, b = kael.ones(2, requires_grad=True), kael.ones(2, requires_grad=True)
    with pytest.raises(kael.ValueError, match="allow_unused"):
        kael.autograd.grad(a.sum(), [a, b])
    assert kael.autograd.grad(a.sum(), [a, b], allow_unused=True)[1] is None


def test_to_device_and_dtype_forms():
    t = kael.ones(2)
    assert t.to(device="cpu") is not None and t.to("cpu", kael.float64).dtype == kael.float64
    assert t.to(dtype=kael.int64).dtype == kael.int64 and t.to(kael.zeros(1, dtype=kael.float64)).dtype == kael.float64
    with pytest.raises(kael.ValueError, match="tpu"):
        t.to("tpu")


def test_cuda_size_default_dtype_and_inference_mode():
    assert kael.cuda.is_available() is False and kael.cuda.device_count() == 0
    kael.cuda.manual_seed_all(1)
    kael.cuda.synchronize()
    shape = kael.zeros(2, 3).shape
    assert isinstance(shape, kael.Size) and shape == (2, 3) and shape.numel() == 6 and kael.zeros(4).size(0) == 4
    try:
        kael.set_default_dtype(kael.float64)
        assert kael.zeros(2).dtype == kael.float64 and kael.tensor([1.5]).dtype == kael.float64
    finally:
        kael.set_default_dtype(kael.float32)
    assert kael.get_default_dtype() == kael.float32
    x = kael.ones(2, requires_grad=True)
    with kael.inference_mode():
        assert not (x * 2).requires_grad

    @kael.inference_mode()
    def run():
        return x * 2
    assert not run().requires_grad and (x * 2).requires_grad


def test_module_apply_double_half_and_load_state_dict_strict():
    for lib in (kael, torch):
        model = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.ReLU(), lib.nn.Linear(4, 2))
        seen = []
        model.apply(lambda m: seen.append(type(m).__name__))
        assert seen == ["Linear", "ReLU", "Linear", "Sequential"]
        weight = model[0].weight
        model.double()
        assert model[0].weight is weight and weight.dtype == lib.float64 and weight.requires_grad
        model.float()
        state = model.state_dict()
        state["extra"] = lib.zeros(1)
        with pytest.raises((kael.Error, RuntimeError)):
            model.load_state_dict(state)
        result = model.load_state_dict(state, strict=False)
        assert list(result.unexpected_keys) == ["extra"] and list(result.missing_keys) == []
    emb = kael.nn.Embedding(5, 3, padding_idx=1)
    assert emb.weight[1].abs().sum().item() == 0
    emb(kael.tensor([1, 2, 1])).sum().backward()
    assert emb.weight.grad[1].abs().sum().item() == 0 and emb.weight.grad[2].abs().sum().item() > 0
    assert kael.nn.LayerNorm(4, bias=False).bias is None
    assert kael.nn.Linear(2, 3, dtype=kael.float64).weight.dtype == kael.float64


def test_nn_init_matches_torchs_formulas():
    w = kael.empty(300, 200)
    bound = np.sqrt(6 / 500)
    kael.nn.init.xavier_uniform_(w)
    assert float(w.abs().max()) <= bound and float(w.abs().max()) > 0.9 * bound
    kael.nn.init.kaiming_normal_(w, nonlinearity="relu")
    assert abs(float(w.std()) - np.sqrt(2 / 200)) < 0.01
    kael.nn.init.zeros_(w)
    assert float(w.abs().sum()) == 0
    assert kael.nn.init.calculate_gain("tanh") == torch.nn.init.calculate_gain("tanh")


@pytest.mark.parametrize("make", [
    lambda lib, opt: lib.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5),
    lambda lib, opt: lib.optim.lr_scheduler.MultiStepLR(opt, milestones=[2, 5], gamma=0.1),
    lambda lib, opt: lib.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9),
    lambda lib, opt: lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=7, eta_min=0.01),
    lambda lib, opt: lib.optim.lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=4),
    lambda lib, opt: lib.optim.lr_scheduler.LambdaLR(opt, lambda s: 1 / (s + 1)),
    lambda lib, opt: lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.5, total_steps=10, cycle_momentum=False),
    lambda lib, opt: lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=[0.5, 0.2], total_steps=10, cycle_momentum=False,
                                                       anneal_strategy="linear", three_phase=True),
])
def test_lr_schedulers_give_torchs_learning_rates(make):
    lrs = []
    for lib in (kael, torch):
        a, b = lib.zeros(2, requires_grad=True), lib.zeros(2, requires_grad=True)
        opt = lib.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.3}], lr=0.1)
        sched = make(lib, opt)
        seen = []
        for _ in range(9):
            opt.step()
            sched.step()
            seen.append([g["lr"] for g in opt.param_groups])
        lrs.append(seen)
        assert sched.get_last_lr() == seen[-1]
    np.testing.assert_allclose(lrs[0], lrs[1], rtol=1e-12)


def test_loss_modules_and_activations_match_torch():
    rng = np.random.default_rng(5)
    logits = rng.standard_normal((6, 4)).astype(np.float32)
    target = np.array([0, 3, 1, -100, 2, 2])
    out = {}
    for lib in (kael, torch):
        x, t = lib.tensor(logits), lib.tensor(target)
        nn = lib.nn
        out[lib.__name__] = [
            nn.CrossEntropyLoss(label_smoothing=0.1)(x, t).item(),
            nn.CrossEntropyLoss(reduction="sum")(x, t).item(),
            nn.NLLLoss()(x.log_softmax(-1), t).item(),
            nn.MSELoss()(x, x * 0.5).item(),
            nn.ReLU()(x).sum().item(),
            nn.Tanh()(x).sum().item(),
        ]
    np.testing.assert_allclose(out["kael"], out["torch"], rtol=1e-5)


def test_data_attribute_is_detached_and_assignable_as_torch():
    p = kael.ones(3, requires_grad=True)
    d = p.data
    assert not d.requires_grad and p.requires_grad
    d[0] = 5.0  # shares memory with p
    assert p[0].item() == 5.0
    p.data = kael.zeros(2, dtype=kael.float64)
    assert p.shape == (2,) and p.dtype == kael.float64 and p.requires_grad
