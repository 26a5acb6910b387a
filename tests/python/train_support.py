"""Shared pieces of the training tests (test_train_*.py): a tiny seeded GPT-2 checkpoint, a slice
of the test corpus as training text, and readers for what a run leaves behind."""
from __future__ import annotations

import json
import pathlib

import pytest

from conftest import CORPUS_DIR

# 2 layers, 2 heads, 32 wide, 64 positions: a step takes a fraction of a second, and most of its
# parameters are the 50257 x 32 embedding.
TINY = dict(n_layer=2, n_head=2, n_embd=32, n_positions=64)
TINY_CONFIG = {"model_type": "gpt2", "vocab_size": 50257, **TINY}
# Options every test run shares unless it says otherwise: small batches, 2 threads.
FAST = ["--batch", "2", "--seq", "16", "--threads", "2"]


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> pathlib.Path:
    """A seeded GPT-2 of shape TINY (transformers' save_pretrained, std 0.02 like a fresh init)."""
    import gpt2_reference

    return gpt2_reference.make_checkpoint(tmp_path_factory.mktemp("tiny") / "model", seed=3, init_std=0.02, **TINY)


@pytest.fixture(scope="session")
def text_file(tmp_path_factory) -> pathlib.Path:
    """About 40 KB of English prose (some 9,000 tokens)."""
    path = tmp_path_factory.mktemp("text") / "prose.txt"
    path.write_bytes((CORPUS_DIR / "en_prose.txt").read_bytes()[:40_000])
    return path


def read_log(path) -> list[dict]:
    return [json.loads(line) for line in pathlib.Path(path).read_text().splitlines()]


def snapshot(directory) -> dict[str, bytes]:
    """Every file under a directory, by relative path (to check that nothing changed)."""
    root = pathlib.Path(directory)
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def checkpoint_bytes(out) -> tuple[bytes, bytes]:
    """(model.safetensors, optimizer.safetensors): the weights and AdamW's moments, byte for byte."""
    out = pathlib.Path(out)
    return (out / "model.safetensors").read_bytes(), (out / "optimizer.safetensors").read_bytes()


# The step `kael train` runs (src/train/net), written in Python: kael.GPT on the tensor library,
# the mean cross-entropy, autograd, kael.nn.utils.clip_grad_norm_ and kael.optim.AdamW with weight
# decay on the 2-D parameters only. The gradient tests compare it with torch.

def gpt_net(directory, threads: int = 2):
    """kael.GPT of the checkpoint in `directory` (its config.json's shape), loaded, in training mode."""
    import kael

    config = json.loads((pathlib.Path(directory) / "config.json").read_text())
    kael.set_num_threads(threads)
    shape = kael.nn.GptConfig(n_layer=config["n_layer"], n_head=config["n_head"], n_embd=config["n_embd"],
                              n_positions=config["n_positions"], vocab_size=config["vocab_size"],
                              tied_embeddings=config.get("tie_word_embeddings", True))
    return kael.GPT(shape).load_gpt2(directory).train()


def gpt_loss(net, inputs, targets, **options):
    """The mean cross-entropy of net's logits on inputs (B, T) against targets (B, T) (numpy ids)."""
    import numpy as np

    import kael
    import kael.nn.functional as F

    logits = net(kael.from_numpy(np.ascontiguousarray(inputs, dtype=np.int64)))
    flat_targets = kael.from_numpy(np.ascontiguousarray(targets, dtype=np.int64).reshape(-1))
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), flat_targets, **options)


def stored(net, field: str = "grad") -> dict:
    """Each parameter's gradient (or "value") under transformers' name, in its layout (Conv1D
    weights (in, out)), as numpy copies."""
    import kael

    out = {}
    for name, p in net.named_parameters():
        array = (p.grad if field == "grad" else p.detach()).numpy()
        out[kael.nn.gpt2_name(name)] = (array.T if kael.nn.stored_transposed(name) else array).copy()
    return out


def gpt_adamw(net, lr: float, betas, eps: float, weight_decay: float):
    """kael.optim.AdamW as a run builds it: weight decay on the 2-D parameters, none on the others."""
    import kael

    params = list(net.parameters())
    return kael.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
                             {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                            lr=lr, betas=betas, eps=eps)


def bf16_refusal():
    """Why a run at precision bf16 is refused on this CPU and kernel set (the run's own check,
    which it makes before reading anything: kernels::gemm_bf16_available), or None where it runs.
    Where it is refused, the float32 matmul precision "medium" runs as "highest"."""
    import kael
    from conftest import ROOT

    try:  # the options are checked first and the bad eval_every right after the precision, so
        # nothing is read but the bundled model's config.json, nor written
        kael.finetune(ROOT / "models" / "kael-tiny-kjv", ["no-data"], "no-out", steps=1, precision="bf16",
                      eval_every=-1)
    except kael.ValueError as error:
        if "AMX-BF16 or AVX512-BF16" in str(error):
            return str(error)
        assert "--eval-every" in str(error), error
        return None
    raise AssertionError("a run with eval_every -1 was not refused")
