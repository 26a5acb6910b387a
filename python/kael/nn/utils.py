"""kael.nn.utils: torch.nn.utils's gradient clipping, ``clip_grad_norm_(parameters, max_norm,
norm_type=2.0)``: scales the gradients in place so that their total norm is at most max_norm
and returns the total norm before (a 0-d tensor)."""
from .._kael import clip_grad_norm_  # noqa: F401  (re-exported)

__all__ = ["clip_grad_norm_"]
