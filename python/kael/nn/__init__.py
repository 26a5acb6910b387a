"""kael.nn: neural-network building blocks, as torch.nn. ``Module`` (subclass it: parameters and
sub-modules assigned as attributes are registered), the layers ``Linear``, ``Embedding``,
``LayerNorm``, ``Dropout``, ``GELU``, ``Sequential``, ``ModuleList``, the book's ``GPT`` with
``GptConfig``, ``kael.nn.functional`` for the functions (linear, layer_norm, cross_entropy, ...) and
``kael.nn.utils`` for gradient clipping."""
from . import functional  # noqa: F401
from . import utils  # noqa: F401
from .._kael import (  # noqa: F401
    GptConfig, KVCache, gpt2_name, load_gpt2_weights, save_gpt2_weights, stored_transposed, translated_gpt2_name,
)
from .gpt import GPT  # noqa: F401
from .modules import GELU, Dropout, Embedding, LayerNorm, Linear, Module, ModuleList, Parameter, Sequential  # noqa: F401
