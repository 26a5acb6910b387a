"""kael.nn: neural-network building blocks, as torch.nn. ``Module`` (subclass it: parameters and
sub-modules assigned as attributes are registered), the layers ``Linear``, ``Embedding``,
``LayerNorm``, ``Dropout``, ``GELU``, ``ReLU``, ``Tanh``, ``Sequential``, ``ModuleList``, ``ModuleDict``, the
losses ``CrossEntropyLoss``, ``NLLLoss``, ``MSELoss``, ``kael.nn.init``, the book's ``GPT`` with
``GptConfig``, ``kael.nn.functional`` for the functions (linear, layer_norm, cross_entropy, ...) and
``kael.nn.utils`` for gradient clipping."""
from . import functional  # noqa: F401
from . import utils  # noqa: F401
from .._kael import (  # noqa: F401
    GptConfig, KVCache, gpt2_name, load_gpt2_weights, save_gpt2_weights, stored_transposed, translated_gpt2_name,
)
from .gpt import GPT  # noqa: F401
from . import init  # noqa: F401
from .modules import (  # noqa: F401
    GELU, CrossEntropyLoss, Dropout, Embedding, Identity, LayerNorm, Linear, Module, ModuleDict, ModuleList, MSELoss,
    NLLLoss, Parameter, ReLU, Sequential, Sigmoid, Tanh,
)
