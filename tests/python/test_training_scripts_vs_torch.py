"""Training scripts written as PyTorch users write them, run once with `lib = torch` and once
with `lib = kael` from the same initial values: a small GPT-style character model with tied
embeddings, AdamW parameter groups (weight decay on the matrices only), a learning-rate
schedule, batches from a DataLoader over a Dataset (with worker processes), a checkpoint saved
and loaded to resume, and sampling with topk and multinomial. The losses and weights must agree
with torch's to float32 rounding."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import kael

VOCAB, BLOCK, EMBD = 13, 8, 16


def make_model(lib):
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(EMBD)
            self.qkv = nn.Linear(EMBD, 3 * EMBD)
            self.proj = nn.Linear(EMBD, EMBD)
            self.mlp = nn.Sequential(nn.Linear(EMBD, 4 * EMBD), nn.GELU(), nn.Linear(4 * EMBD, EMBD))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.qkv(self.ln(x)).split(EMBD, dim=2)
            q, k, v = (t.view(B, T, 2, C // 2).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
            return x + self.mlp(x)

    class TinyGPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(dict(wte=nn.Embedding(VOCAB, EMBD), wpe=nn.Embedding(BLOCK, EMBD),
                                                  h=nn.ModuleList([Block(), Block()]), ln_f=nn.LayerNorm(EMBD)))
            self.lm_head = nn.Linear(EMBD, VOCAB, bias=False)
            self.transformer.wte.weight = self.lm_head.weight

        def forward(self, idx, targets=None):
            t = idx.size(1)
            pos = lib.arange(0, t, dtype=lib.long)
            x = self.transformer.wte(idx) + self.transformer.wpe(pos)
            for block in self.transformer.h:
                x = block(x)
            logits = self.lm_head(self.transformer.ln_f(x))
            if targets is None:
                return logits, None
            return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)

    return TinyGPT()


def same_weights(kael_model, torch_model):
    with torch.no_grad():
        for (name, k), (tname, t) in zip(kael_model.named_parameters(), torch_model.named_parameters()):
            assert name == tname
            t.copy_(torch.tensor(k.detach().numpy()))


def optimizer(lib, model):
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    return lib.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                           lr=3e-3, betas=(0.9, 0.95))


def dataset_class(lib):
    class Chars(lib.utils.data.Dataset):
        """Windows of a fixed pseudo-random text, y shifted by one with the last target ignored."""

        def __init__(self, n):
            rng = np.random.default_rng(4)
            self.text = rng.integers(1, VOCAB, size=n + BLOCK + 1)
            self.n = n

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            x = lib.tensor(self.text[i:i + BLOCK], dtype=lib.long)
            y = lib.zeros(BLOCK, dtype=lib.long)
            y[:BLOCK - 1] = lib.tensor(self.text[i + 1:i + BLOCK], dtype=lib.long)
            y[BLOCK - 1:] = -1
            return x, y
    return Chars


def train(lib, model, steps, workers, state=None, start=0):
    opt = optimizer(lib, model)
    sched = lib.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 3) * 0.5 * (1 + math.cos(math.pi * s / 20)))
    if state is not None:
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
    loader = lib.utils.data.DataLoader(dataset_class(lib)(48), batch_size=6, shuffle=False, num_workers=workers,
                                       drop_last=True)
    losses = []
    batches = iter(loader)
    for _ in range(start):  # a resumed run skips the batches it has seen
        next(batches)
    for _ in range(steps):
        x, y = next(batches)
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        lib.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
    return losses, opt, sched


def test_gpt_script_with_tying_groups_schedule_and_dataloader_workers_matches_torch():
    kael.manual_seed(0)
    k_model = make_model(kael)
    t_model = make_model(torch)
    same_weights(k_model, t_model)
    assert [n for n, _ in k_model.named_parameters()] == [n for n, _ in t_model.named_parameters()]
    k_losses, k_opt, _ = train(kael, k_model, 6, workers=2)
    t_losses, t_opt, _ = train(torch, t_model, 6, workers=0)
    np.testing.assert_allclose(k_losses, t_losses, rtol=2e-5)
    assert [g["lr"] for g in k_opt.param_groups] == pytest.approx([g["lr"] for g in t_opt.param_groups])
    # Adam divides by sqrt(v): an element whose gradient is float32 noise can move by up to lr
    # either way, so the weights are held to a fraction of one step (3e-3), the losses tightly.
    for (_, k), (_, t) in zip(k_model.named_parameters(), t_model.named_parameters()):
        np.testing.assert_allclose(k.detach().numpy(), t.detach().numpy(), rtol=0, atol=1e-3)


def test_save_load_and_resume_continues_as_an_uninterrupted_run(tmp_path):
    kael.manual_seed(1)
    straight = make_model(kael)
    resumed = make_model(kael)
    resumed.load_state_dict(straight.state_dict())
    straight_losses, _, _ = train(kael, straight, 4, workers=0)

    first, opt, sched = train(kael, resumed, 2, workers=0)
    kael.save({"model": resumed.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
               "step": 2, "note": "tiny"}, tmp_path / "ckpt.pt")
    checkpoint = kael.load(tmp_path / "ckpt.pt")
    assert checkpoint["step"] == 2 and checkpoint["note"] == "tiny"
    fresh = make_model(kael)
    fresh.load_state_dict(checkpoint["model"])
    assert fresh.lm_head.weight is fresh.transformer.wte.weight
    rest, _, _ = train(kael, fresh, 2, workers=0, state=checkpoint, start=2)
    np.testing.assert_allclose(first + rest, straight_losses, rtol=1e-6)
    for (_, a), (_, b) in zip(fresh.named_parameters(), straight.named_parameters()):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-7)


def test_save_refuses_what_it_cannot_store_and_load_never_unpickles(tmp_path):
    with pytest.raises(kael.TypeError):
        kael.save({"fn": print}, tmp_path / "x")
    kael.save_safetensors(str(tmp_path / "plain.safetensors"), {"a": kael.ones(1)})
    with pytest.raises(kael.ValueError, match="kael.save"):
        kael.load(tmp_path / "plain.safetensors")


def test_dataloader_shuffle_workers_and_collate():
    ds = kael.utils.data.TensorDataset(kael.arange(10), kael.arange(10) * 2)
    kael.manual_seed(3)
    plain = [(x.tolist(), y.tolist()) for x, y in kael.utils.data.DataLoader(ds, batch_size=4, shuffle=True)]
    kael.manual_seed(3)
    pooled = [(x.tolist(), y.tolist()) for x, y in kael.utils.data.DataLoader(ds, batch_size=4, shuffle=True,
                                                                              num_workers=2)]
    assert plain == pooled
    assert sorted(sum((x for x, _ in plain), [])) == list(range(10))
    assert all(y == [2 * v for v in x] for x, y in plain)
    assert len(kael.utils.data.DataLoader(ds, batch_size=4, drop_last=True)) == 2
    sampler = kael.utils.data.RandomSampler(ds, replacement=True, num_samples=7)
    assert len(list(sampler)) == 7
    dicts = kael.utils.data.default_collate([{"a": 1, "b": kael.ones(2)}, {"a": 2, "b": kael.zeros(2)}])
    assert dicts["a"].tolist() == [1, 2] and dicts["b"].shape == (2, 2)


def test_sampling_with_topk_and_multinomial_as_torchs_generate():
    kael.manual_seed(2)
    k_model = make_model(kael)
    t_model = make_model(torch)
    same_weights(k_model, t_model)
    for lib, model in ((kael, k_model), (torch, t_model)):
        model.eval()

    def step(lib, model, idx, top_k):
        with lib.no_grad():
            logits, _ = model(idx)
            logits = logits[:, -1, :] / 0.8
            v, _ = lib.topk(logits, top_k)
            logits[logits < v[:, [-1]]] = -float("Inf")
            return lib.nn.functional.softmax(logits, dim=-1)

    idx = np.array([[1, 5, 7], [2, 2, 3]])
    k_probs = step(kael, k_model, kael.tensor(idx), 4)
    t_probs = step(torch, t_model, torch.tensor(idx), 4)
    np.testing.assert_allclose(k_probs.numpy(), t_probs.numpy(), rtol=1e-4, atol=1e-6)
    allowed = [set(np.nonzero(row)[0]) for row in t_probs.numpy()]
    draws = kael.multinomial(k_probs, num_samples=200, replacement=True)
    for row, ok in zip(draws.tolist(), allowed):
        assert set(row) <= ok and len(set(row)) > 1
    greedy = kael.topk(k_probs, k=1, dim=-1).indices
    assert greedy.tolist() == torch.topk(t_probs, k=1, dim=-1).indices.tolist()
    nxt = kael.multinomial(k_probs, num_samples=1)
    assert kael.cat((kael.tensor(idx), nxt), dim=1).shape == (2, 4)
