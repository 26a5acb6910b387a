"""kael: GPT-2 inference in C++ with no ML framework.

The everyday API::

    import kael
    model = kael.Model.from_pretrained("data/gpt2")
    print(model.generate("Hello, my name is", max_tokens=20, temperature=0))
    for piece in model.stream("The meaning of life is", max_tokens=40, seed=1):
        print(piece, end="", flush=True)

Also: kael.BpeTokenizer (ids equal tiktoken's gpt2 encoding), kael.load_safetensors /
save_safetensors / read_safetensors_metadata (numpy views share memory with mapped files),
and a small book-style API (kael.GPT, kael.tensor).
"""
from __future__ import annotations

import os
from typing import Any, Mapping, Optional

import numpy as np

from ._kael import (  # noqa: F401  (re-exported)
    BpeTokenizer,
    Error,
    GenerationStream,
    IncrementalDecoder,
    IndexError,
    Model,
    Tensor,
    TypeError,
    ValueError,
    load_safetensors,
    read_safetensors_metadata,
    save_safetensors,
    tensor,
)

__version__ = "0.1.0"

# Book-style configuration names and their GPT-2 (config.json) equivalents.
_BOOK_NAMES = {
    "vocab_size": "vocab_size",
    "context_length": "n_positions",
    "emb_dim": "n_embd",
    "n_heads": "n_head",
    "n_layers": "n_layer",
}

GPT2_SMALL = {"vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12}


def _normalize_config(config: Optional[Mapping[str, Any]]) -> dict:
    out = dict(GPT2_SMALL)
    for key, value in (config or {}).items():
        name = _BOOK_NAMES.get(key, key)
        if name in GPT2_SMALL:
            out[name] = int(value)
        # other keys (drop_rate, qkv_bias, ...) describe training and do not change inference
    return out


class GPT:
    """A GPT-2 model in the style of the "build a GPT from scratch" books.

    ``GPT(config)`` describes the shape (GPT-2 small when None); ``load_gpt2(path)`` reads the
    weights (a checkpoint directory); calling the model on ids of shape (B, T) returns logits of
    shape (B, T, vocab). Only the CPU is supported: ``to("cuda")`` raises kael.Error.
    """

    def __init__(self, config: Optional[Mapping[str, Any]] = None):
        self.config = _normalize_config(config)
        self._model: Optional[Model] = None

    def load_gpt2(self, path: str | os.PathLike) -> "GPT":
        path = os.fspath(path)
        directory = os.path.dirname(path) if path.endswith(".safetensors") else path
        model = Model.from_pretrained(directory)
        loaded = {k: model.config[k] for k in GPT2_SMALL}
        if loaded != self.config:
            raise ValueError(f"checkpoint {path} has shape {loaded}, the GPT was configured as {self.config}")
        self._model = model
        return self

    def to(self, device: str) -> "GPT":
        if str(device) != "cpu":
            raise Error(f"device '{device}' is not available: this kael build runs on the CPU only")
        return self

    def eval(self) -> "GPT":
        return self

    def __call__(self, ids) -> np.ndarray:
        if self._model is None:
            raise Error("no weights loaded: call load_gpt2(path) first")
        batch = np.asarray(ids, dtype=np.int64)
        if batch.ndim == 1:
            batch = batch[None, :]
        if batch.ndim != 2 or batch.shape[1] == 0:
            raise ValueError(f"ids must have shape (B, T) with T >= 1, got {batch.shape}")
        out = np.empty((batch.shape[0], batch.shape[1], self.config["vocab_size"]), dtype=np.float32)
        for b, row in enumerate(batch):
            for t in range(batch.shape[1]):
                out[b, t] = self._model.logits([int(i) for i in row[: t + 1]])
        return out

    forward = __call__
