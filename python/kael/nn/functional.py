"""The neural-network functions of kael's tensor library, with torch.nn.functional's names and
signatures: ``F.linear(x, w, b)``, ``F.layer_norm(x, (C,), w, b)``, ``F.cross_entropy(logits,
targets)``, ... They run on the same kernels as kael's GPT-2 engine and record gradients."""
from .._kael import (  # noqa: F401  (re-exported)
    cross_entropy,
    dropout,
    embedding,
    gelu,
    layer_norm,
    linear,
    log_softmax,
    relu,
    scaled_dot_product_attention,
    sigmoid,
    softmax,
    tanh,
)

__all__ = ["cross_entropy", "dropout", "embedding", "gelu", "layer_norm", "linear", "log_softmax", "relu",
           "scaled_dot_product_attention", "sigmoid", "softmax", "tanh"]
