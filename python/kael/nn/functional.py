"""The neural-network functions of kael's tensor library, with torch.nn.functional's names and
signatures: ``F.linear(x, w, b)``, ``F.layer_norm(x, (C,), w, b)``, ``F.cross_entropy(logits,
targets)``, ... They run on the same kernels as kael's GPT-2 engine and record gradients."""
from __future__ import annotations

from typing import Any

from .. import _kael
from .._kael import (  # noqa: F401  (re-exported)
    adaptive_avg_pool2d,
    avg_pool2d,
    batch_norm,
    conv1d,
    conv2d,
    cross_entropy,
    dropout,
    dropout1d,
    dropout2d,
    gelu,
    group_norm,
    layer_norm,
    linear,
    log_softmax,
    max_pool1d,
    max_pool2d,
    mse_loss,
    multi_head_attention_forward,
    nll_loss,
    one_hot,
    relu,
    scaled_dot_product_attention,
    sigmoid,
    softmax,
    tanh,
)
from .._kael import Tensor

__all__ = ["adaptive_avg_pool2d", "avg_pool2d", "batch_norm", "conv1d", "conv2d", "cross_entropy", "dropout",
           "dropout1d", "dropout2d", "embedding", "gelu", "group_norm", "layer_norm", "linear", "log_softmax",
           "max_pool1d", "max_pool2d", "mse_loss", "multi_head_attention_forward", "nll_loss", "one_hot", "relu",
           "scaled_dot_product_attention", "sigmoid", "softmax", "tanh"]


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None, max_norm: Any = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of weight picked by the ids in input; the row padding_idx gets no gradient."""
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise _kael.ValueError("embedding: max_norm, scale_grad_by_freq and sparse are not supported")
    out = _kael.embedding(input, weight)
    if padding_idx is None or not out.requires_grad:
        return out
    if padding_idx < 0:
        padding_idx += weight.shape[0]
    # The same values; at padding positions they come from a detached copy, so no gradient flows.
    return _kael.where((input == padding_idx).unsqueeze(-1), out.detach(), out)
