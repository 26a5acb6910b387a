"""kael.nn: neural-network building blocks. ``kael.nn.functional`` holds the functions
(linear, layer_norm, cross_entropy, ...), as torch.nn.functional."""
from . import functional  # noqa: F401
