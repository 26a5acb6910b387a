"""kael.nn.LSTM over a longer sequence, trained as word_language_model does (the state carried
from batch to batch and detached, SGD steps between), against torch from the same weights; and
the layer's saved hidden weights checked for in-place changes before its backward."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import kael


def test_carried_state_training_matches_torch():
    t_lstm = torch.nn.LSTM(6, 9, num_layers=2)
    k_lstm = kael.nn.LSTM(6, 9, num_layers=2)
    k_lstm.load_state_dict({n: kael.tensor(v.numpy()) for n, v in t_lstm.state_dict().items()})
    t_opt, k_opt = torch.optim.SGD(t_lstm.parameters(), lr=0.5), kael.optim.SGD(k_lstm.parameters(), lr=0.5)
    rng = np.random.default_rng(3)
    t_state = (torch.zeros(2, 4, 9), torch.zeros(2, 4, 9))
    k_state = (kael.zeros(2, 4, 9), kael.zeros(2, 4, 9))
    for _ in range(3):
        x = rng.standard_normal((37, 4, 6)).astype(np.float32)
        w = rng.standard_normal((37, 4, 9)).astype(np.float32)
        t_out, t_state = t_lstm(torch.tensor(x), tuple(s.detach() for s in t_state))
        k_out, k_state = k_lstm(kael.tensor(x), tuple(s.detach() for s in k_state))
        t_loss = (t_out * torch.tensor(w)).sum() + t_state[1].sum()
        k_loss = (k_out * kael.tensor(w)).sum() + k_state[1].sum()
        assert abs(k_loss.item() - t_loss.item()) <= 1e-4 * max(1.0, abs(t_loss.item()))
        for opt, loss in ((t_opt, t_loss), (k_opt, k_loss)):
            opt.zero_grad()
            loss.backward()
            opt.step()
    t_params = dict(t_lstm.named_parameters())
    for name, p in k_lstm.named_parameters():
        np.testing.assert_allclose(p.detach().numpy(), t_params[name].detach().numpy(), rtol=1e-4, atol=1e-4)


def test_hidden_weight_changed_before_backward_is_an_error():
    lstm = kael.nn.LSTM(3, 4)
    out, _ = lstm(kael.ones(5, 2, 3))
    with kael.no_grad():
        lstm.weight_hh_l0.mul_(2)
    with pytest.raises(ValueError):
        out.sum().backward()
