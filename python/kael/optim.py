"""kael.optim: torch.optim's SGD, Adam and AdamW over kael.Tensor parameters (docs/optim.md)::

    opt = kael.optim.AdamW(params, lr=1e-3, weight_decay=0.1)
    loss.backward()
    kael.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    opt.zero_grad()

Same constructor signatures and update formulas as torch's (one parameter group); parameters
without a gradient are skipped; ``lr`` is settable; ``state_dict()`` is a flat dict of tensors
that kael.save_safetensors writes as it is."""
from ._kael import (  # noqa: F401  (re-exported under torch's names)
    _optim_Adam as Adam,
    _optim_AdamW as AdamW,
    _optim_Optimizer as Optimizer,
    _optim_SGD as SGD,
)

__all__ = ["Adam", "AdamW", "Optimizer", "SGD"]
