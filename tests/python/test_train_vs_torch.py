"""`kael finetune --order sequential` against the same ten steps in PyTorch: the windows the
formula names, accumulation, clipping, weight decay on 2-D parameters and a cosine schedule with
warmup give each step's loss within 1e-4 of torch's and the saved weights within 1e-4."""
from __future__ import annotations

import math

import numpy as np
import pytest

from train_support import read_log, text_file, tiny_model  # noqa: F401

B, T, K, STEPS = 2, 16, 2, 10
LR, MIN_LR, WARMUP, CLIP, DECAY = 1e-3, 1e-4, 2, 0.5, 0.1


def lr_at(s: int) -> float:
    if s < WARMUP:
        return LR * (s + 1) / WARMUP
    return MIN_LR + 0.5 * (1 + math.cos(math.pi * (s - WARMUP) / (STEPS - WARMUP))) * (LR - MIN_LR)


def torch_steps(model_dir, tokens):
    import torch
    from transformers import GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel.from_pretrained(str(model_dir), dtype=torch.float32, attn_implementation="eager",
                                            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model.train()
    params = list(model.parameters())
    optimizer = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": DECAY},
                                   {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                                  lr=LR, betas=(0.9, 0.999), eps=1e-8)
    data = torch.tensor(tokens, dtype=torch.long)
    windows = (len(tokens) - 1) // T
    losses = []
    for s in range(STEPS):
        total = 0.0
        for k in range(K):
            # micro-batch k of step s reads windows (s*K + k)*B ... + B - 1, modulo the window count
            rows = [data[(((s * K + k) * B + b) % windows) * T:][: T + 1] for b in range(B)]
            batch = torch.stack(rows)
            logits = model(batch[:, :-1]).logits
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1))
            (loss / K).backward()
            total += loss.item() / K
        torch.nn.utils.clip_grad_norm_(params, CLIP)
        for group in optimizer.param_groups:
            group["lr"] = lr_at(s)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(total)
    return losses, {name: p.detach().numpy() for name, p in model.named_parameters()}


def test_ten_sequential_steps_match_torch(kael, tiny_model, text_file, tmp_path, tiktoken_gpt2):
    from safetensors.numpy import load_file

    out, log = tmp_path / "out", tmp_path / "log.jsonl"
    kael("finetune", "--model", tiny_model, "--data", text_file, "--out", out, "--threads", "2", "--steps", STEPS,
         "--batch", B, "--seq", T, "--accum", K, "--order", "sequential", "--lr", LR, "--schedule", "cosine",
         "--min-lr", MIN_LR, "--warmup", WARMUP, "--grad-clip", CLIP, "--weight-decay", DECAY, "--dropout", "0",
         "--log-json", log)
    tokens = tiktoken_gpt2.encode_ordinary(text_file.read_bytes().decode("utf-8")) + [50256]
    expected_losses, expected_weights = torch_steps(tiny_model, tokens)

    records = [r for r in read_log(log) if r["type"] == "step"]
    assert [r["lr"] for r in records] == pytest.approx([lr_at(s) for s in range(STEPS)], rel=1e-12)
    assert [r["loss"] for r in records] == pytest.approx(expected_losses, abs=1e-4)
    weights = load_file(str(out / "model.safetensors"))
    worst = 0.0
    for name, expected in expected_weights.items():
        if name == "lm_head.weight":  # tied to wte
            continue
        error = float(np.max(np.abs(weights[name] - expected)))
        assert error < 1e-4, name
        worst = max(worst, error)
    print(f"\nkael finetune, ten steps: largest |step loss kael - torch| = "
          f"{max(abs(r['loss'] - e) for r, e in zip(records, expected_losses)):.2e}, largest saved |weight kael - torch| = "
          f"{worst:.2e} (bounds 1e-4)")
