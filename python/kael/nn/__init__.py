"""kael.nn: neural-network building blocks. ``kael.nn.functional`` holds the functions
(linear, layer_norm, cross_entropy, ...), as torch.nn.functional; ``kael.nn.utils`` the
gradient clipping, as torch.nn.utils."""
from . import functional  # noqa: F401
from . import utils  # noqa: F401
