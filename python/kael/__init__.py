"""kael: GPT-2 inference in C++ with no ML framework.

The everyday API::

    import kael
    model = kael.Model.from_pretrained("data/gpt2")      # or "bundled": the small model that ships with kael
    print(model.generate("Hello, my name is", max_tokens=20, temperature=0))
    for piece in model.stream("The meaning of life is", max_tokens=40, seed=1):
        print(piece, end="", flush=True)

Training: kael.finetune(model_dir, data, out_dir, steps=..., callback=...) fine-tunes a
checkpoint, kael.train(config, data, out_dir, ...) trains a fresh one; both take the options of
`kael finetune` as keyword arguments (dashes as underscores) and return the history.

Also: kael.BpeTokenizer (ids equal tiktoken's gpt2 encoding), kael.load_safetensors /
save_safetensors / read_safetensors_metadata (numpy views share memory with mapped files),
and a small book-style API (kael.GPT, kael.tensor).
"""
from __future__ import annotations

from ._kael import (  # noqa: F401  (re-exported)
    BpeTokenizer,
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
)

from ._kael import __version__  # noqa: F401  (the CMake project version)
from .book import GPT, GPT2_SMALL  # noqa: F401  (the book-style API)
