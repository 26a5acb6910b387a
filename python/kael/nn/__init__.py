"""kael.nn: neural-network building blocks, as torch.nn. ``Module`` (subclass it: parameters and
sub-modules assigned as attributes are registered), the layers ``Linear``, ``Embedding``,
``LayerNorm``, ``Dropout``, ``GELU``, ``ReLU``, ``Tanh``, ``Sequential``, ``ModuleList``, ``ModuleDict``,
``Conv1d``, ``Conv2d``, ``MaxPool1d``, ``MaxPool2d``, ``AvgPool2d``, ``AdaptiveAvgPool2d``, ``Flatten``,
``Dropout1d``, ``Dropout2d``, ``BatchNorm1d``, ``BatchNorm2d``, ``GroupNorm``, ``RNN``, ``LSTM``, ``GRU``,
``MultiheadAttention``, ``TransformerEncoderLayer``, ``TransformerEncoder``, the
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
from .convolution import (  # noqa: F401
    AdaptiveAvgPool2d, AvgPool2d, Conv1d, Conv2d, Dropout1d, Dropout2d, Flatten, MaxPool1d, MaxPool2d,
)
from .normalization import BatchNorm1d, BatchNorm2d, GroupNorm  # noqa: F401
from .rnn import GRU, LSTM, RNN, RNNBase  # noqa: F401
from .transformer import MultiheadAttention, TransformerEncoder, TransformerEncoderLayer  # noqa: F401
from .modules import (  # noqa: F401
    GELU, CrossEntropyLoss, Dropout, Embedding, Identity, LayerNorm, Linear, Module, ModuleDict, ModuleList, MSELoss,
    NLLLoss, Parameter, ReLU, Sequential, Sigmoid, Tanh,
)
