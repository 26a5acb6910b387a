"""The book's GPT in Python: kael::nn::GPT (GPT-2's architecture from kael.nn modules, on the
tensor library), with load_gpt2 for Hugging Face's GPT-2 checkpoints and kael.generate.

    model = kael.GPT()                               # GPT-2 small; kael.GPT(kael.nn.GptConfig(n_layer=4, ...))
    model.load_gpt2("data/gpt2/model.safetensors")   # or the checkpoint's directory
    model.to("cpu")
    model.eval()
    logits = model(kael.tensor([ids]))               # (B, T, vocab), every position
    out = kael.generate(model, kael.tensor([ids]), max_new_tokens=20, temperature=0.8, top_k=40)
"""
from __future__ import annotations

import json
import os
import pathlib
from typing import Any, Mapping

from .. import _kael
from .._kael import GptConfig, KVCache, Tensor
from .modules import _NativeModel

_CONFIG_FIELDS = ("vocab_size", "n_positions", "n_layer", "n_head", "n_embd", "dropout", "tanh_gelu", "bias",
                  "tied_embeddings", "layer_norm_eps")


# Another book's names for the same sizes: refused, so that they never load as GPT-2 small.
_OTHER_NAMES = {"emb_dim": "n_embd", "n_heads": "n_head", "n_layers": "n_layer", "context_length": "n_positions",
                "drop_rate": "dropout", "qkv_bias": "bias"}


def _config(config: GptConfig | Mapping[str, Any] | None) -> GptConfig:
    if config is None:
        return GptConfig.gpt2_small()
    if isinstance(config, GptConfig):
        return config
    # A mapping with GptConfig's names, which are config.json's: its other keys are ignored.
    config = dict(config)
    other = sorted(k for k in config if k in _OTHER_NAMES)
    if other:
        raise _kael.ValueError("GPT config: " + ", ".join(f"'{k}' is '{_OTHER_NAMES[k]}' here" for k in other) +
                               " (kael.nn.GptConfig's names are config.json's)")
    return GptConfig(**{k: v for k, v in config.items() if k in _CONFIG_FIELDS})


def gpt2_config_json(config: GptConfig) -> dict[str, Any]:
    """The config.json of transformers' GPT2Config for a model of `config`'s shape."""
    return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": config.vocab_size,
            "n_positions": config.n_positions, "n_ctx": config.n_positions, "n_embd": config.n_embd,
            "n_layer": config.n_layer, "n_head": config.n_head, "n_inner": None,
            "activation_function": "gelu_new" if config.tanh_gelu else "gelu",
            "resid_pdrop": config.dropout, "embd_pdrop": config.dropout, "attn_pdrop": config.dropout,
            "layer_norm_epsilon": config.layer_norm_eps, "tie_word_embeddings": config.tied_embeddings,
            **({"bos_token_id": 50256, "eos_token_id": 50256} if config.vocab_size > 50256 else {})}


class GPT(_NativeModel):
    """GPT-2's architecture as kael::nn modules (names blocks.{i}.attn.qkv.weight, ...).

    Calling it on ids (B, T) returns the logits of every position, (B, T, vocab). With
    ``use_cache=True`` the ids continue the previous call's sequences through a KV cache and
    only they are computed; ``reset_kv_cache()`` starts over. It trains as any kael.nn.Module.
    """

    def __init__(self, config: GptConfig | Mapping[str, Any] | None = None) -> None:
        super().__init__(_kael._GPT(_config(config)))
        object.__setattr__(self, "_cache", None)
        object.__setattr__(self, "_cache_rows", 0)

    @property
    def config(self) -> GptConfig:
        return self._native.config

    def load_gpt2(self, path: str | os.PathLike[str]) -> GPT:
        """Loads GPT-2 weights (Hugging Face's names and Conv1D layout) from a .safetensors file or a
        directory holding model.safetensors; the config must match the checkpoint's sizes."""
        file = pathlib.Path(path)
        if file.is_dir():
            file = file / "model.safetensors"
        _kael.load_gpt2_weights(self._native, file)
        self.reset_kv_cache()
        return self

    def save_gpt2(self, path: str | os.PathLike[str]) -> None:
        """Writes the weights as a GPT-2 checkpoint (Hugging Face's names and Conv1D layout) to a
        .safetensors file, or to model.safetensors plus its config.json in a directory, which
        transformers' GPT2LMHeadModel.from_pretrained loads."""
        target = pathlib.Path(path)
        if target.suffix == ".safetensors":
            _kael.save_gpt2_weights(self._native, target)
            return
        target.mkdir(parents=True, exist_ok=True)
        _kael.save_gpt2_weights(self._native, target / "model.safetensors")
        (target / "config.json").write_text(json.dumps(gpt2_config_json(self.config), indent=2) + "\n")

    def reset_kv_cache(self) -> None:
        object.__setattr__(self, "_cache", None)

    def forward(self, ids: Any, use_cache: bool = False) -> Tensor:
        batch = ids if isinstance(ids, Tensor) else _kael.as_tensor(ids)
        if batch.dim() == 1:
            batch = batch.unsqueeze(0)  # one row may come without the batch axis
        if not use_cache:
            return self._native.forward(batch)
        if self._cache is None:
            object.__setattr__(self, "_cache", KVCache())
            object.__setattr__(self, "_cache_rows", batch.shape[0])
        elif batch.shape[0] != self._cache_rows:
            raise _kael.ValueError(f"the KV cache holds {self._cache_rows} sequences but ids has {batch.shape[0]} rows "
                                   "(call reset_kv_cache() to start another batch)")
        return self._native.forward(batch, self._cache)

    def extra_repr(self) -> str:
        return repr(self.config)


def generate(model: GPT, prompt: Any, max_new_tokens: int = 60, temperature: float = 1.0, top_k: int = 0) -> Tensor:
    """prompt (B, T) ids -> (B, T + max_new_tokens): tokens drawn one at a time from
    softmax(logits / temperature) among the top_k (0: all; temperature 0: greedy), with the
    generator kael.manual_seed seeds, through a KV cache. An empty prompt is kael.ValueError."""
    ids = prompt if isinstance(prompt, Tensor) else _kael.as_tensor(prompt)
    if ids.dim() == 1:
        ids = ids.unsqueeze(0)
    return _kael._generate(model._native, ids, max_new_tokens, temperature, top_k)


def cuda_synchronize() -> None:
    """Waits for the CUDA devices' queued work to finish (kael.cuda.synchronize); returns at once
    where nothing runs on one."""
    _kael._cuda.synchronize()
