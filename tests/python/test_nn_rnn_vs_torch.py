"""kael.nn.RNN / LSTM / GRU and the one-step cell functions against torch's, from identical
weights: outputs, final states and the gradients of the input, the initial states and every
parameter, on odd sizes, several layers, batch_first, unbatched input and given initial states."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import kael

RTOL = 1e-4


def close(got, want, what):
    got = got.detach().numpy() if isinstance(got, kael.Tensor) else np.asarray(got)
    want = want.detach().numpy()
    assert got.shape == want.shape, f"{what}: shape {got.shape} vs {want.shape}"
    scale = max(float(np.abs(want).max(initial=0.0)), 1.0)
    err = float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max(initial=0.0))
    assert err <= RTOL * scale, f"{what}: max error {err}"


def leaf_pair(values):
    values = values.astype(np.float32)
    return kael.tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)


CASES = [
    # kind, input, hidden, layers, bias, batch_first, T, B, with initial state
    ("LSTM", 5, 7, 1, True, False, 6, 3, False),
    ("LSTM", 4, 6, 2, True, True, 5, 2, True),
    ("LSTM", 3, 5, 3, False, False, 4, 1, True),
    ("GRU", 5, 7, 1, True, False, 6, 3, False),
    ("GRU", 6, 3, 2, False, True, 7, 4, True),
    ("RNN", 5, 4, 2, True, False, 5, 3, True),
    ("RNN-relu", 3, 6, 1, True, True, 4, 2, False),
    ("LSTM", 4, 5, 2, True, False, 5, None, True),  # unbatched
    ("GRU", 4, 5, 1, True, False, 3, None, False),  # unbatched
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_recurrent_layers_match_torch(case):
    kind, n_in, hidden, layers, bias, batch_first, T, B, with_state = case
    options = dict(num_layers=layers, bias=bias, batch_first=batch_first)
    if kind.startswith("RNN"):
        options["nonlinearity"] = "relu" if kind == "RNN-relu" else "tanh"
        k_layer, t_layer = kael.nn.RNN(n_in, hidden, **options), torch.nn.RNN(n_in, hidden, **options)
    else:
        k_layer, t_layer = getattr(kael.nn, kind)(n_in, hidden, **options), getattr(torch.nn, kind)(n_in, hidden, **options)
    assert list(k_layer.state_dict()) == list(t_layer.state_dict())
    bound = 1 / np.sqrt(hidden)
    for name, p in k_layer.named_parameters():
        assert tuple(p.shape) == tuple(t_layer.state_dict()[name].shape)
        assert np.abs(p.detach().numpy()).max() <= bound
    k_layer.load_state_dict({n: kael.tensor(v.numpy()) for n, v in t_layer.state_dict().items()})

    rng = np.random.default_rng(len(kind) + T)
    shape = (T, n_in) if B is None else ((B, T, n_in) if batch_first else (T, B, n_in))
    kx, tx = leaf_pair(rng.standard_normal(shape))
    state_shape = (layers, hidden) if B is None else (layers, B, hidden)
    k_state, t_state = None, None
    leaves = [(kx, tx)]
    if with_state:
        kh, th = leaf_pair(rng.standard_normal(state_shape))
        leaves.append((kh, th))
        if kind == "LSTM":
            kc, tc = leaf_pair(rng.standard_normal(state_shape))
            leaves.append((kc, tc))
            k_state, t_state = (kh, kc), (th, tc)
        else:
            k_state, t_state = kh, th
    k_out, k_final = k_layer(kx, k_state)
    t_out, t_final = t_layer(tx, t_state)
    close(k_out, t_out, "output")
    k_finals = k_final if isinstance(k_final, tuple) else (k_final,)
    t_finals = t_final if isinstance(t_final, tuple) else (t_final,)
    for k, t in zip(k_finals, t_finals):
        close(k, t, "final state")
    weights = [rng.standard_normal(tuple(t.shape)).astype(np.float32) for t in (t_out, *t_finals)]
    k_loss = sum(((k * kael.tensor(w)).sum() for k, w in zip((k_out, *k_finals), weights)), kael.zeros(()))
    t_loss = sum((t * torch.tensor(w)).sum() for t, w in zip((t_out, *t_finals), weights))
    k_loss.backward()
    t_loss.backward()
    for i, (k, t) in enumerate(leaves):
        close(k.grad, t.grad, f"gradient of leaf {i}")
    t_params = dict(t_layer.named_parameters())
    for name, p in k_layer.named_parameters():
        close(p.grad, t_params[name].grad, f"gradient of {name}")


def test_cells_match_torch():
    rng = np.random.default_rng(0)
    B, n_in, H = 3, 5, 4
    x = rng.standard_normal((B, n_in))
    h, c = rng.standard_normal((B, H)), rng.standard_normal((B, H))
    for name, gates in (("lstm_cell", 4), ("gru_cell", 3), ("rnn_tanh_cell", 1), ("rnn_relu_cell", 1)):
        w_ih, w_hh = rng.standard_normal((gates * H, n_in)), rng.standard_normal((gates * H, H))
        b_ih, b_hh = rng.standard_normal(gates * H), rng.standard_normal(gates * H)
        ks, ts = zip(*[leaf_pair(a) for a in (x, h, c, w_ih, w_hh, b_ih, b_hh)])
        if name == "lstm_cell":
            k_out = kael.lstm_cell(ks[0], (ks[1], ks[2]), *ks[3:])
            t_out = torch.lstm_cell(ts[0], (ts[1], ts[2]), *ts[3:])
            (k_out[0].sum() + (k_out[1] * 2).sum()).backward()
            (t_out[0].sum() + (t_out[1] * 2).sum()).backward()
            close(k_out[1], t_out[1], "lstm c'")
            k_out, t_out = k_out[0], t_out[0]
            used = range(7)
        else:
            k_out = getattr(kael, name)(ks[0], ks[1], *ks[3:])
            t_out = getattr(torch, name)(ts[0], ts[1], *ts[3:])
            k_out.sum().backward()
            t_out.sum().backward()
            used = (0, 1, 3, 4, 5, 6)
        close(k_out, t_out, name)
        for i in used:
            close(ks[i].grad, ts[i].grad, f"{name}: gradient of argument {i}")


def test_dropout_between_layers_and_errors():
    layer = kael.nn.LSTM(3, 4, num_layers=2, dropout=0.5)
    x = kael.randn(5, 2, 3)
    kael.manual_seed(1)
    a, _ = layer(x)
    kael.manual_seed(2)
    b, _ = layer(x)
    assert not np.allclose(a.detach().numpy(), b.detach().numpy())  # training: the masks differ
    layer.eval()
    np.testing.assert_array_equal(layer(x)[0].detach().numpy(), layer(x)[0].detach().numpy())
    with pytest.raises(ValueError, match="expects weights"):
        layer(kael.randn(5, 2, 4))
    with pytest.raises(ValueError, match="hx"):
        layer(x, (kael.zeros(1, 2, 4), kael.zeros(1, 2, 4)))
    with pytest.raises(ValueError, match="bidirectional"):
        kael.nn.GRU(3, 4, bidirectional=True)
    with pytest.raises(ValueError, match="nonlinearity"):
        kael.nn.RNN(3, 4, nonlinearity="sigmoid")
