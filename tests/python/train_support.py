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
