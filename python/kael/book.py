"""The book-style API: kael.GPT in the manner of the "build a GPT from scratch" books.

    gpt = kael.GPT(GPT_CONFIG_124M).load_gpt2("data/gpt2/model.safetensors").to("cpu").eval()
    logits = gpt(kael.tensor([ids]))          # (B, T, vocab), every position in one pass
    logits = gpt(ids, use_cache=True)         # feeds only the new tokens to a KV cache
    gpt.reset_kv_cache()

The tokenizer is the caller's (the books use tiktoken's gpt2 encoding).
"""
from __future__ import annotations

import os
from typing import Any, Mapping, Optional

import numpy as np

from . import _kael

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

    ``GPT(config)`` describes the shape (GPT-2 small when None; book names such as ``emb_dim``
    or config.json names); ``load_gpt2(path)`` reads the weights (a checkpoint directory, or a
    .safetensors file with config.json beside it) and checks they have that shape. Calling the
    model on ids of shape (B, T) returns the logits of every position, shape (B, T, vocab), in one
    forward pass. With ``use_cache=True`` the ids continue the previous call's through a KV
    cache (one per row) and only they are computed; ``reset_kv_cache()`` starts over. Only the
    CPU exists in this build: ``to("cuda")`` raises kael.Error.
    """

    def __init__(self, config: Optional[Mapping[str, Any]] = None):
        self.config = _normalize_config(config)
        self._model: Optional[_kael.BookModel] = None
        self._cache: Optional[_kael.BookKVCache] = None

    def load_gpt2(self, path: str | os.PathLike, dtype: str = "f32") -> "GPT":
        model = _kael.BookModel.load(os.fspath(path), dtype)
        shape = {key: model.config[key] for key in GPT2_SMALL}
        if shape != self.config:
            raise _kael.ValueError(f"checkpoint {os.fspath(path)} has shape {shape}, "
                                   f"the GPT was configured as {self.config}")
        self._model, self._cache = model, None
        return self

    def to(self, device) -> "GPT":
        _kael.require_device(str(device))
        return self

    def eval(self) -> "GPT":
        return self

    def reset_kv_cache(self) -> None:
        self._cache = None

    def __call__(self, ids, use_cache: bool = False) -> np.ndarray:
        if self._model is None:
            raise _kael.Error("no weights loaded: call load_gpt2(path) first")
        batch = np.asarray(ids)
        if batch.ndim == 1:
            batch = batch[None, :]
        if not use_cache:
            return self._model.logits(batch)
        if self._cache is None:
            self._cache = self._model.new_cache(batch.shape[0])
        return self._cache.feed(batch)

    forward = __call__
