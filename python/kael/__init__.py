"""kael: GPT-2 inference in C++ with no ML framework.

The everyday API::

    import kael
    model = kael.Model.from_pretrained("data/gpt2")      # or "bundled": the small model that ships with kael
    print(model.generate("Hello, my name is", max_tokens=20, temperature=0))
    for piece in model.stream("The meaning of life is", max_tokens=40, seed=1):
        print(piece, end="", flush=True)

Training: kael.finetune(model_dir, data, out_dir, steps=..., callback=...) fine-tunes a
checkpoint, kael.train(config, data, out_dir, ...) trains a fresh one; both take the options of
`kael finetune` as keyword arguments (dashes as underscores) and return the history. Under
`mpirun -np N` they train data-parallel on N ranks (kael.world() says which rank this is).

Also: kael.BpeTokenizer (ids equal tiktoken's gpt2 encoding), kael.load_safetensors /
save_safetensors / read_safetensors_metadata (numpy views share memory with mapped files),
and the book's GPT (kael.GPT, kael.generate) built from kael.nn on the tensor library.

The tensor library, with PyTorch's names (docs/tensor.md)::

    x = kael.randn(8, 3, requires_grad=True)
    loss = (x @ kael.ones(3, 1)).relu().mean()
    loss.backward()          # x.grad now holds d(loss)/dx
    with kael.no_grad():
        x -= 0.1 * x.grad

kael.from_numpy / Tensor.numpy() share memory with numpy; kael.nn.functional holds linear,
layer_norm, cross_entropy and the other neural-network functions; kael.optim holds SGD, Adam
and AdamW, and kael.nn.utils.clip_grad_norm_ clips gradients, as torch's (docs/optim.md).
"""
from __future__ import annotations

from ._kael import (  # noqa: F401  (re-exported)
    BpeTokenizer,
    Node,
    Error,
    GenerationStream,
    IncrementalDecoder,
    IndexError,
    Model,
    Tensor,
    TypeError,
    ValueError,
    bundled_model_dir,
    finetune,
    load_safetensors,
    read_safetensors_metadata,
    save_safetensors,
    tensor,
    train,
    world,
)
# The tensor library (python/src/tensor*.cpp), with PyTorch's names.
from ._kael import (  # noqa: F401  (re-exported)
    abs, add, all, allclose, any, arange, argmax, argmin, as_strided_scatter, as_tensor, bmm, broadcast_shapes, cat,
    chunk, clamp, clip, cos, device, div, dtype, einsum, empty, empty_like, eq, exp, eye, flatten, floor_divide,
    from_numpy, full, full_like, gather, ge, gelu, get_default_dtype, get_float32_matmul_precision, get_num_threads, gt,
    index_select, is_tensor, le, linspace, log, log_softmax, lt, manual_seed, masked_fill, matmul, max, maximum, mean,
    min, minimum, mul, multinomial, ne, neg, numel, ones, ones_like, permute, pow, promote_types, rand, rand_like,
    randint, randn, randn_like, randperm, relu, remainder, reshape, roll, rsqrt, set_default_dtype,
    set_float32_matmul_precision, set_num_threads, sigmoid, sin, softmax, split, sqrt, squeeze, stack, std, sub, sum,
    tanh, topk, transpose, tril, triu, unbind, unsqueeze, var, where, zeros, zeros_like,
)
# Convolution, pooling, normalization and recurrent cells (python/src/conv.cpp, rnn.cpp), as torch.conv2d ...
from ._kael import (  # noqa: F401  (re-exported)
    adaptive_avg_pool2d, avg_pool2d, batch_norm, conv1d, conv2d, group_norm, gru_cell, lstm_cell, max_pool1d,
    max_pool2d, rnn_relu_cell, rnn_tanh_cell,
)
from ._kael import (  # noqa: F401  (dtypes, as torch.float32 ...)
    bfloat16, bool, double, float, float16, float32, float64, half, int, int8, int16, int32, int64, long, short,
    uint8, uint16, uint32, uint64,
)
from . import nn  # noqa: F401,E402
from . import optim  # noqa: F401,E402
from . import autograd  # noqa: F401,E402
from . import backends  # noqa: F401,E402
from . import cuda  # noqa: F401,E402
from . import utils  # noqa: F401,E402
from .autograd import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled  # noqa: F401,E402
from .serialization import load, save  # noqa: F401,E402
from .size import Size  # noqa: F401,E402

from ._kael import __version__  # noqa: F401  (the CMake project version)
from .nn.gpt import GPT, cuda_synchronize, generate  # noqa: F401,E402  (the book's GPT)
