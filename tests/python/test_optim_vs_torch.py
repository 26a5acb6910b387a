"""kael.optim against torch.optim: a small two-layer model (its loss computed with kael's ops,
backward, step) trained ten steps by each optimizer under several hyperparameter sets, beside
the same model in torch: losses and weights equal within 1e-4 of the largest. Also parameters
that get no gradient (never, or every other step), a learning rate schedule, the state dict
(its values against torch's state, and a round trip through save_safetensors that continues
as if uninterrupted) and clip_grad_norm_ against torch.nn.utils'. The steps worked by hand are
in tests/optim_test.cpp."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import kael

TOLERANCE = 1e-4
STEPS = 10

CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.5, dampening=0.3, weight_decay=0.1)),
    ("Adam", dict()),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1)),
    ("Adam", dict(lr=0.05, eps=1e-6)),
    ("AdamW", dict()),
    ("AdamW", dict(lr=0.01, weight_decay=0.1)),
    ("AdamW", dict(lr=0.02, betas=(0.5, 0.9), weight_decay=0.0)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1)),
    ("RMSprop", dict()),
    ("RMSprop", dict(lr=0.005, alpha=0.9, weight_decay=0.1, momentum=0.8)),
    ("RMSprop", dict(lr=0.002, centered=True, momentum=0.5, eps=1e-6)),
]
IDS = [f"{name}-{'-'.join(f'{k}={v}' for k, v in options.items()) or 'defaults'}" for name, options in CASES]


def close(got, want, what):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    scale = max(float(np.abs(want).max()), 1e-12)
    assert np.abs(got - want).max() <= TOLERANCE * scale, f"{what}: {got} vs {want}"


class Model:
    """A 6 -> 5 -> 3 MLP with an extra parameter used every other step and one never used, as
    the same float32 values in kael and torch."""

    NAMES = ("w1", "b1", "w2", "b2", "sometimes", "never")

    def __init__(self, seed=0):
        rng = np.random.default_rng(seed)
        shapes = {"w1": (5, 6), "b1": (5,), "w2": (3, 5), "b2": (3,), "sometimes": (3,), "never": (2, 2)}
        self.values = {n: (rng.standard_normal(shapes[n]) * 0.5).astype(np.float32) for n in self.NAMES}
        self.x = rng.standard_normal((16, 6)).astype(np.float32)
        self.y = rng.standard_normal((16, 3)).astype(np.float32)
        self.k = [kael.tensor(self.values[n], requires_grad=True) for n in self.NAMES]
        self.t = [torch.tensor(self.values[n], requires_grad=True) for n in self.NAMES]

    @staticmethod
    def loss(lib, params, x, y, step):
        w1, b1, w2, b2, sometimes, _never = params
        F = kael.nn.functional if lib is kael else torch.nn.functional
        h = F.linear(x, w1, b1).tanh()
        out = F.linear(h, w2, b2)
        if step % 2 == 0:
            out = out + sometimes
        return ((out - y) ** 2).mean()

    def kael_step(self, opt, step):
        opt.zero_grad()
        loss = self.loss(kael, self.k, kael.tensor(self.x), kael.tensor(self.y), step)
        loss.backward()
        opt.step()
        return loss.item()

    def torch_step(self, opt, step):
        opt.zero_grad()
        loss = self.loss(torch, self.t, torch.tensor(self.x), torch.tensor(self.y), step)
        loss.backward()
        opt.step()
        return loss.item()

    def compare(self, what):
        for name, k, t in zip(self.NAMES, self.k, self.t):
            close(k.detach().numpy(), t.detach().numpy(), f"{what}: {name}")


def optimizers(model, name, options):
    return getattr(kael.optim, name)(model.k, **options), getattr(torch.optim, name)(model.t, **options)


@pytest.mark.parametrize("name,options", CASES, ids=IDS)
def test_ten_steps_match_torch(name, options):
    model = Model()
    k_opt, t_opt = optimizers(model, name, options)
    for step in range(STEPS):
        close(model.kael_step(k_opt, step), model.torch_step(t_opt, step), f"loss at step {step}")
        model.compare(f"after step {step}")
    assert np.array_equal(model.k[5].detach().numpy(), model.values["never"])  # no gradient: untouched
    assert model.k[5].grad is None


@pytest.mark.parametrize("name,options", [CASES[i] for i in (1, 5, 8, 11, 13)], ids=[IDS[i] for i in (1, 5, 8, 11, 13)])
def test_add_param_group_midway_matches_torch(name, options):
    # The second layer joins after three steps with options of its own: the first layer's state
    # (moments, step counts) carries on, and the new group starts fresh, as in torch.
    model = Model()
    k_opt = getattr(kael.optim, name)(model.k[:2] + model.k[4:], **options)
    t_opt = getattr(torch.optim, name)(model.t[:2] + model.t[4:], **options)
    for step in range(STEPS):
        if step == 3:
            k_opt.add_param_group({"params": model.k[2:4], "lr": options.get("lr", 0.01) / 2})
            t_opt.add_param_group({"params": model.t[2:4], "lr": options.get("lr", 0.01) / 2})
            assert [g["lr"] for g in k_opt.param_groups] == [g["lr"] for g in t_opt.param_groups]
        close(model.kael_step(k_opt, step), model.torch_step(t_opt, step), f"loss at step {step}")
        model.compare(f"after step {step}")


def test_add_param_group_refuses_a_parameter_it_has_and_changes_nothing():
    model = Model()
    opt = kael.optim.Adam(model.k[:2], lr=0.1)
    model.kael_step(opt, 0)
    before = opt.state_dict()
    with pytest.raises(kael.ValueError, match="more than once"):
        opt.add_param_group({"params": [model.k[2], model.k[0]]})
    with pytest.raises(kael.ValueError, match="unknown option"):
        opt.add_param_group({"params": [model.k[2]], "momentum": 0.9})
    assert len(opt.param_groups) == 1
    after = opt.state_dict()
    assert before.keys() == after.keys()
    assert all(np.array_equal(before[k].numpy(), after[k].numpy()) for k in before)


STATE_CASES = [2, 5, 8, 11, 14]


@pytest.mark.parametrize("name,options", [CASES[i] for i in STATE_CASES], ids=[IDS[i] for i in STATE_CASES])
def test_state_matches_torchs_state(name, options):
    model = Model()
    k_opt, t_opt = optimizers(model, name, options)
    for step in range(3):
        model.kael_step(k_opt, step)
        model.torch_step(t_opt, step)
    state = k_opt.state_dict()
    assert float(state["param_groups.0.lr"].item()) == options.get("lr", 1e-3)
    assert list(state["param_groups.0.params"].numpy()) == list(range(len(Model.NAMES)))
    for i, t in enumerate(model.t):
        t_state = t_opt.state[t]
        if not t_state:
            assert not any(key.startswith(f"state.{i}.") for key in state), i  # "never"
            continue
        for key, value in t_state.items():
            if key == "step":
                assert int(state[f"state.{i}.step"].item()) == int(value.item()), i
            else:
                close(state[f"state.{i}.{key}"].numpy(), value.numpy(), f"state.{i}.{key}")
    assert "state.5.exp_avg" not in state and "state.5.momentum_buffer" not in state


@pytest.mark.parametrize("name,options", [CASES[i] for i in (2, 5, 9, 11, 13)], ids=[IDS[i] for i in (2, 5, 9, 11, 13)])
def test_state_dict_round_trip_through_safetensors(name, options, tmp_path):
    model = Model()
    k_opt, t_opt = optimizers(model, name, options)
    for step in range(5):
        model.kael_step(k_opt, step)
    path = tmp_path / "optimizer.safetensors"
    kael.save_safetensors(path, k_opt.state_dict())

    # A fresh optimizer (another lr, which the state overrides) over copies of the parameters.
    params = [kael.tensor(p.detach().numpy().copy(), requires_grad=True) for p in model.k]
    model.k = params
    resumed = getattr(kael.optim, name)(params, **{**options, "lr": 0.5})
    resumed.load_state_dict(kael.load_safetensors(path))
    assert resumed.lr == k_opt.lr
    for step in range(STEPS):
        if step < 5:
            model.torch_step(t_opt, step)
        else:
            close(model.kael_step(resumed, step), model.torch_step(t_opt, step), f"loss at step {step}")
    model.compare("after the resumed steps")


def test_lr_schedule_matches_torch():
    model = Model()
    k_opt, t_opt = optimizers(model, "AdamW", dict(lr=0.05, weight_decay=0.1))
    for step in range(STEPS):
        lr = 0.05 * (1 - step / STEPS)
        k_opt.lr = lr
        for group in t_opt.param_groups:
            group["lr"] = lr
        close(model.kael_step(k_opt, step), model.torch_step(t_opt, step), f"loss at step {step}")
    model.compare("after the schedule")


def test_errors_and_arguments():
    p = kael.zeros(3, requires_grad=True)
    with pytest.raises(ValueError, match="learning rate"):
        kael.optim.SGD([p], lr=-0.1)
    with pytest.raises(ValueError, match="Nesterov"):
        kael.optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="beta parameter at index 1"):
        kael.optim.Adam([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="empty parameter list"):
        kael.optim.AdamW([])
    with pytest.raises(TypeError):
        kael.optim.Adam(p)  # a single tensor, as torch refuses it
    with pytest.raises(TypeError):
        kael.optim.Adam([p, "w"])
    opt = kael.optim.Adam(iter([p]))  # any iterable
    with pytest.raises(ValueError, match="learning rate"):
        opt.lr = -1
    assert opt.lr == 1e-3
    with pytest.raises(ValueError, match="unknown key"):
        opt.load_state_dict(kael.optim.SGD([p], momentum=0.9).state_dict())
    assert isinstance(opt, kael.optim.Optimizer) and type(opt).__name__ == "Adam"
    assert kael.optim.AdamW([p]).state_dict()["param_groups.0.weight_decay"].item() == 1e-2


def test_step_closure_and_zero_grad():
    p = kael.tensor([1.0, 2.0], requires_grad=True)
    opt = kael.optim.SGD([p], lr=0.5)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    with kael.no_grad():
        loss = opt.step(closure)  # grad mode is on inside the closure
    assert loss.item() == 5.0
    np.testing.assert_allclose(p.detach().numpy(), [0.0, 0.0])
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(p.grad.numpy(), [0.0, 0.0])
    opt.zero_grad()
    assert p.grad is None
    assert opt.step() is None
    assert [q is not None for q in opt.params] == [True]


@pytest.mark.parametrize("max_norm,norm_type", [(0.5, 2.0), (100.0, 2.0), (0.1, 1.0), (0.2, float("inf")),
                                                (0.3, 3.0)])
def test_clip_grad_norm_matches_torch(max_norm, norm_type):
    rng = np.random.default_rng(1)
    grads = [rng.standard_normal(s).astype(np.float32) for s in [(4, 3), (3,), (2, 2, 2)]]
    k = [kael.zeros(*g.shape, requires_grad=True) for g in grads] + [kael.zeros(2, requires_grad=True)]
    t = [torch.zeros(g.shape, requires_grad=True) for g in grads] + [torch.zeros(2, requires_grad=True)]
    for kp, tp, g in zip(k, t, grads):
        kp.grad = kael.tensor(g)
        tp.grad = torch.tensor(g)
    k_total = kael.nn.utils.clip_grad_norm_(k, max_norm, norm_type)
    t_total = torch.nn.utils.clip_grad_norm_(t, max_norm, norm_type)
    assert isinstance(k_total, kael.Tensor) and k_total.dim() == 0
    close(k_total.item(), t_total.item(), "total norm")
    for kp, tp in zip(k[:3], t[:3]):
        close(kp.grad.numpy(), tp.grad.numpy(), "clipped gradient")
    assert k[3].grad is None and t[3].grad is None
    # A single tensor is accepted, as torch accepts it.
    k[0].grad = kael.tensor(grads[0])
    t[0].grad = torch.tensor(grads[0])
    close(kael.nn.utils.clip_grad_norm_(k[0], 0.1).item(), torch.nn.utils.clip_grad_norm_(t[0], 0.1).item(), "one")
    close(k[0].grad.numpy(), t[0].grad.numpy(), "one tensor clipped")
